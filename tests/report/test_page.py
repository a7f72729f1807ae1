import re
from pathlib import Path

import orjson
import pytest

from loadkit.report import build_html, load_raw, read_raw_logs, write_html
from loadkit.report.manifest import missing_conditions
from tests.report.conftest import make_rows, report_from_rows

ALL_PLOTS = {"slo-attainment", "ttft-cdf", "ttft-sched-cdf", "tpot-cdf", "itl-cdf", "e2e-cdf", "throughput-ts",
             "inflight-ts", "ttft-ts", "latency-throughput", "length-buckets", "ttft-turn", "outcomes",
             "server-running", "server-waiting", "server-kv_usage"}  # fmt: skip


def plots_in(html: str) -> set[str]:
    return set(re.findall(r'<svg class="plot" data-plot="([^"]+)"', html))


def missing_in(html: str) -> set[str]:
    return set(re.findall(r'data-missing="([^"]+)"', html))


def test_every_section_renders_from_a_full_run(full_run: Path):
    out = write_html(full_run)
    html = out.read_text()
    assert out == full_run / "report.html"
    assert plots_in(html) == ALL_PLOTS
    # No model config named; the synthetic rows carry no server timings.
    assert missing_in(html) == {"capacity", "server breakdown", "channels"}
    delivered = html.split('<section id="delivered">')[1].split("</section>")[0]
    assert delivered.count("<tr><td>") >= 4 and "<td>low</td>" in delivered and "<td>high</td>" in delivered
    for sec in ("summary", "slo", "cdfs", "timeseries", "stages", "delivered", "buckets", "turns", "outcomes", "server",
                "warnings", "manifest", "definitions"):  # fmt: skip
        assert f'<section id="{sec}">' in html
    assert "From the raw log (every ok request)" in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "").replace(
        "http://127.0.0.1:1", ""
    )


def test_every_plot_draws_marks(full_run: Path):
    html = write_html(full_run).read_text()
    for svg in re.findall(r'<svg class="plot".*?</svg>', html, re.S):
        name = re.search(r'data-plot="([^"]+)"', svg).group(1)
        assert re.search(r'class="series" (d="M|x=|cx=)', svg), name
        assert "<title>" in svg and 'class="tt"' in svg and 'class="tk"' in svg, name


def test_without_raw_log_the_raw_sections_say_not_measured(tmp_path: Path):
    report = report_from_rows({"a": make_rows("a", 50, 1)})
    html = build_html(report, None)
    # The stage, bucket and turn tables come from report.json's sections, not the raw log.
    assert missing_in(html) == {"ttft-ts", "server-metrics", "capacity", "delivered load", "server breakdown",
                                "channels"}  # fmt: skip
    assert {"latency-throughput", "length-buckets", "ttft-turn"} <= plots_in(html)
    assert "From the report percentiles" in html
    assert {"ttft-cdf", "tpot-cdf", "throughput-ts", "outcomes"} <= plots_in(html)


def test_a_bare_report_renders_without_raising():
    html = build_html({"engines": {}}, None)
    assert "Not measured: the report has no engine sections" in html
    assert plots_in(html) == set()
    html = build_html({"engines": {"x": {"requests": 0}}}, None)
    assert "ttft-cdf" in missing_in(html)


def test_a_broken_section_costs_only_that_section():
    report = report_from_rows({"a": make_rows("a", 30, 1)})
    report["engines"]["a"]["timeseries"] = {"t": [0, 1], "output_tokens": ["x", None]}  # not numbers
    html = build_html(report, None)
    assert "this section failed to render" in html
    assert "could not be drawn" in html  # listed in warnings too
    assert "ttft-cdf" in plots_in(html)


def test_secrets_are_redacted_everywhere():
    report = report_from_rows({"a": make_rows("a", 20, 1)})
    report["manifest"].update({
        "api_key": "sk-live-SECRET1234", "hf_token": "hf_SECRETSECRET", "headers": {"Authorization": "Bearer SECRET99"},
        "argv": ["locust", "--api-key", "SECRETKEY0", "--api-key=SECRETKEY1", "--host", "http://u:SECRETPW@127.0.0.1"],
        "note": "token=SECRET55 max_tokens=7"})  # fmt: skip
    report["warnings"].append("auth failed with Bearer SECRET77")
    html = build_html(report, None)
    assert "SECRET" not in html
    assert html.count("***") >= 6
    assert "max_tokens=7" in html  # a token count is not a secret


def test_everything_is_escaped():
    rows = make_rows("<img src=x onerror=alert(1)>", 20, 1)
    report = report_from_rows({rows[0]["engine"]: rows})
    html = build_html(report, read_raw_logs([]))
    assert "<img" not in html and "&lt;img src=x" in html


def test_missing_manifest_conditions_are_listed():
    report = report_from_rows({"a": make_rows("a", 20, 1)})
    missing = missing_conditions(report)
    assert "lengths asked" in missing and "scenario file" not in missing and "client CPU model" not in missing
    report["manifest"] = {}
    assert "scenario file" in missing_conditions(report)
    assert "not recorded" in build_html(report, None)


def test_write_html_is_atomic_and_reads_report_json(full_run: Path, tmp_path: Path):
    out = write_html(full_run, out=tmp_path / "elsewhere" / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".tmp")]


def test_malformed_raw_lines_are_counted_and_shown(full_run: Path):
    with open(full_run / "requests.jsonl", "ab") as f:
        f.write(b'{"engine": "a", "outco')  # a crash cut the last line
    raw = load_raw(full_run)
    assert raw is not None and raw.malformed == 1 and raw.rows == 800
    html = write_html(full_run).read_text()
    assert "1 malformed line(s)" in html


def test_server_metrics_top_level_section_is_used_too():
    report = report_from_rows({"a": make_rows("a", 20, 1)})
    report["server_metrics"] = {
        "a": {"samples": [{"t": 1.0, "values": {"running": 3}}, {"t": 2.0, "values": {"running": 5}}]}
    }
    assert "server-running" in plots_in(build_html(report, None))


def test_report_json_round_trip_via_write_html(tmp_path: Path):
    report = report_from_rows({"a": make_rows("a", 20, 1)})
    (tmp_path / "report.json").write_bytes(orjson.dumps(report))
    html = write_html(tmp_path).read_text()
    assert "loadkit report" in html


@pytest.mark.parametrize("bad", [b"[]", b"not json"])
def test_unreadable_report_json_raises_for_the_caller(tmp_path: Path, bad: bytes):
    (tmp_path / "report.json").write_bytes(bad)
    with pytest.raises(ValueError):
        write_html(tmp_path)


def test_an_invalid_run_says_why_at_the_top_and_lists_the_servers_words():
    report = report_from_rows({"a": make_rows("a", 50, 1)})
    detail = "{\"detail\": \"Unexpected fields in the request: {'min_tokens', 'ignore_eos'}\"}"
    report["engines"]["a"]["error_messages"] = {
        "http_error:422": {"total": 7, "top": [{"message": detail, "count": 5}], "other": 2}}  # fmt: skip
    report.update(valid=False, invalid_reasons=["circuit breaker: 20 of the first 20 requests failed; run stopped",
                                                "target a: no request succeeded <b>"])  # fmt: skip
    html = build_html(report, None)
    head = html[: html.index('<section id="summary">')]
    assert 'class="bad">INVALID' in head and "This run is invalid" in head
    assert "circuit breaker: 20 of the first 20 requests failed; run stopped" in head
    assert "&lt;b&gt;" in head and "no request succeeded <b>" not in html  # escaped
    errors = html[html.index('<section id="errors">') :]
    errors = errors[: errors.index("</section>")]
    assert "http_error:422" in errors and "Unexpected fields" in errors and "other messages" in errors
    assert "run INVALID: circuit breaker" in html  # in the warnings list too


def test_a_row_of_messages_differing_in_numbers_is_shown_by_its_example():
    report = report_from_rows({"a": make_rows("a", 50, 1)})
    example = "maximum context length is 8192 tokens. However, you requested 10914 tokens"
    report["engines"]["a"]["error_messages"] = {"http_error:400": {"total": 37, "other": 0, "top": [
        {"message": example, "count": 37, "varied": True, "template": "… <n> tokens. However, you requested <n> tokens"},
        {"message": "exactly this", "count": 2, "varied": False, "template": "exactly this"}]}}  # fmt: skip
    html = build_html(report, None)
    errors = html[html.index('<section id="errors">') :]
    errors = errors[: errors.index("</section>")]
    assert (
        f"<td>e.g. <code>{example}</code></td>" in errors and "<td><code>exactly this</code></td>" in errors
    )


def test_the_first_traceback_of_an_adapter_error_is_on_the_page_escaped():
    report = report_from_rows({"a": make_rows("a", 50, 1)})
    message = "engine 'flaky' (plugin loadkit-flaky 0.3, adapter flaky_plugin.FlakyAdapter): parse raised ValueError: <x>"
    report["engines"]["a"]["error_messages"] = {"adapter_error": {"total": 3, "other": 0, "top": [
        {"message": message, "count": 3, "varied": False, "template": message}]}}  # fmt: skip
    trace = (
        'Traceback (most recent call last):\n  File "flaky_plugin.py", line 29, in parse\nValueError: <x>\n'
    )
    report["adapter_errors"] = {"other": 0, "kinds": [{"engine": "a", "adapter": "flaky", "count": 3, "message": message,
                                                       "template": message, "traceback": trace}]}  # fmt: skip
    errors = build_html(report, None)
    errors = errors[errors.index('<section id="errors">') :]
    errors = errors[: errors.index("</section>")]
    assert "<summary>adapter_error ×3 on a: the first one&#39;s traceback</summary>" in errors
    assert (
        '<pre class="block">Traceback (most recent call last):\n  File &#34;flaky_plugin.py&#34;, line 29'
        in errors
    )
    assert "ValueError: &lt;x&gt;" in errors and "<x>" not in errors


def test_failed_leaves_cancelled_out_old_reports_included():
    report = report_from_rows({"a": make_rows("a", 50, 1)})
    section = report["engines"]["a"]
    section["outcomes"]["cancelled"] = 3
    section["requests"] += 3
    section["cancelled"] = 3
    html = build_html(report, None)
    assert html.count("<td>3</td>") >= 1  # the cancelled column
    old = report_from_rows({"a": make_rows("a", 50, 1)})
    old_section = old["engines"]["a"]
    del old_section["cancelled"], old_section["error_messages"], old_section["stream_ends"]
    old_section["outcomes"]["cancelled"] = 4
    old_section["failures"] += 4  # how reports before the field counted them
    old_html = build_html(old, None)
    failed = old_section["failures"] - 4
    row = old_html[old_html.index("<td>a</td><td>(all)</td>") :].split("</tr>")[0]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    assert cells[4:6] == [str(failed), "4"]
    assert 'data-missing="errors"' in old_html and "older loadkit" in old_html


def test_the_nav_links_exactly_the_sections_on_the_page(full_run: Path):
    report = orjson.loads((full_run / "report.json").read_bytes())
    html = build_html(report, load_raw(full_run), full_run)
    nav = re.search(r"<nav>(.*?)</nav>", html, re.S)
    assert nav is not None
    linked = re.findall(r'href="#([^"]+)"', nav.group(1))
    present = set(re.findall(r'<section id="([^"]+)"', html))
    assert linked and set(linked) <= present
    # A run with no price, no GPU source and no images has no such sections, so no links to them.
    assert not {"cost", "gpu", "images"} & set(linked)
    assert {"summary", "stages", "outcomes", "definitions"} <= set(linked)
