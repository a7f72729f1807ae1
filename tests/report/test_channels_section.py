"""The reasoning / answer / tool-call table of report.html, from report.json engine sections."""

from loadkit.report.channels import channels_section
from loadkit.report.compare import _table_value


def summary(p50, p99=None, count=10):
    return {"count": count, "p50": p50, "p90": p50, "p99": p99 if p99 is not None else p50}


def test_engines_with_reasoning_get_a_row_and_plain_ones_do_not():
    thinking = {"ttft_ms": summary(40.0, 90.0), "ttfat_ms": summary(2500.0, 4100.0), "ttfrt_ms": summary(40.0, count=8),
                "reasoning_ms": summary(2450.0), "ttftc_ms": None, "answer_tpot_ms": summary(12.5),
                "n_reasoning": summary(180.0), "n_answer": summary(60.0), "n_tool": None}  # fmt: skip
    plain = {"ttft_ms": summary(30.0), "ttfat_ms": summary(30.0), "ttfrt_ms": {"count": 0, "p50": None}}
    html = channels_section({"engines": {"r1": thinking, "plain": plain}})
    assert "<td>r1</td>" in html and "<td>plain</td>" not in html
    assert "2,500.0" in html and "4,100.0" in html and "2,450.0" in html and "180" in html
    assert "data-missing" not in html


def test_without_reasoning_or_tool_calls_the_section_says_not_measured():
    html = channels_section({"engines": {"plain": {"ttft_ms": summary(30.0), "ttfrt_ms": {"count": 0}}}})
    assert 'data-missing="channels"' in html and "--think-tags" in html


def test_compare_reads_a_report_from_before_the_channel_metrics_as_not_measured():
    assert _table_value({"ttft_ms": summary(1.0)}, "ttfat_ms.p50") is None
    assert _table_value({"ttfat_ms": summary(7.0)}, "ttfat_ms.p50") == 7.0
