"""The "Reasoning, answer and tool calls" section: per engine, what the user waits for (time to
first answer token) next to TTFT, the thinking phase, and tokens per channel."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import NOT_MEASURED, not_measured, note, num, section, table
from loadkit.report.tables import engines_of, stat

CHANNEL_HEAD = ("engine", "TTFT p50", "TTFT p99", "first answer p50", "first answer p99", "first reasoning p50",
                "reasoning p50", "reasoning p99", "first tool call p50", "answer TPOT p50", "reasoning tokens p50",
                "answer tokens p50", "tool-call tokens p50", "replies with reasoning", "replies with tool calls")  # fmt: skip
CELLS = (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("ttfat_ms", "p50"), ("ttfat_ms", "p99"), ("ttfrt_ms", "p50"),
         ("reasoning_ms", "p50"), ("reasoning_ms", "p99"), ("ttftc_ms", "p50"), ("answer_tpot_ms", "p50"),
         ("n_reasoning", "p50"), ("n_answer", "p50"), ("n_tool", "p50"), ("ttfrt_ms", "count"),
         ("ttftc_ms", "count"))  # fmt: skip


def has_channels(s: dict[str, Any]) -> bool:
    """Reasoning or tool calls were seen (a plain answer alone adds nothing to the summary)."""
    return bool(stat(s, "ttfrt_ms", "count") or stat(s, "ttftc_ms", "count"))


def channels_section(report: dict[str, Any]) -> str:
    engines = engines_of(report)
    rows = [[engine] + [num(stat(s, m, p)) for m, p in CELLS] for engine, s in engines.items()
            if has_channels(s)]  # fmt: skip
    if not rows:
        return section("channels", "Reasoning, answer and tool calls",
                       not_measured("channels", "no reply had reasoning or tool calls (or the engine does not mark "
                                    "them: see docs/metrics.md; --think-tags for <think> in the text)"))  # fmt: skip
    return section("channels", "Reasoning, answer and tool calls",
                   note("TTFT is the first token of any channel; first answer = time to the first answer token "
                        "(ttfat_ms), what a user of a reasoning model waits for; reasoning = from the first "
                        "reasoning token to the first answer or tool-call token. ms over ok requests; tokens per "
                        f"request; {NOT_MEASURED} = not measured."),
                   table(CHANNEL_HEAD, rows, "channels"))  # fmt: skip
