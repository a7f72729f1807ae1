"""The stream timer's last step for a parser's channel marks: the record's per-channel times
and token counts (reasoning, answer, tool calls), worked out once per request from the
``ChannelMarks`` (loadkit/core/channels.py) the parser kept.
"""

from __future__ import annotations

from loadkit.core.channels import ANSWER, REASONING, TOOL, ChannelMarks
from loadkit.records import RequestRecord


def run_spans(runs: list[tuple[int, int]], n_events: int) -> list[tuple[int, int, int]]:
    """(channel, first index, end index) of every run; a run may be empty (mixed event)."""
    spans = []
    for i, (start, channel) in enumerate(runs):
        end = runs[i + 1][0] if i + 1 < len(runs) else n_events
        spans.append((channel, start, max(start, min(end, n_events))))
    return spans


def apply_channels(rec: RequestRecord, marks: ChannelMarks) -> None:
    """Fill the record's per-channel times and counts from the parser's marks (once, at the end)."""
    events, tokens = rec.event_t_ns, rec.event_tokens
    spans = [s for s in run_spans(marks.runs, len(events)) if s[1] < len(events)]
    counts = [0, 0, 0]
    for channel, start, end in spans:
        counts[channel] += sum(tokens[start:end])
        _first_and_last(rec, channel, events, start, end)
    rec.t_reasoning_end_ns = _reasoning_end(spans, events)
    rec.n_tool = counts[TOOL] if rec.t_first_tool_ns is not None else None
    if marks.tool_calls is not None:
        rec.tool_calls = marks.tool_calls.as_list()
    _reasoning_count(rec, counts[REASONING])
    _answer_count(rec, counts[ANSWER])


def _first_and_last(rec: RequestRecord, channel: int, events: list[int], start: int, end: int) -> None:
    t_first = events[start]
    if channel == ANSWER:
        if rec.t_first_answer_ns is None:
            rec.t_first_answer_ns = t_first
        if end > start:
            rec.t_last_answer_ns = events[end - 1]
    elif channel == REASONING:
        if rec.t_first_reasoning_ns is None:
            rec.t_first_reasoning_ns = t_first
        rec.t_last_reasoning_ns = events[end - 1] if end > start else t_first
    elif rec.t_first_tool_ns is None:
        rec.t_first_tool_ns = t_first


def _reasoning_end(spans: list[tuple[int, int, int]], events: list[int]) -> int | None:
    """Arrival of the first answer or tool-call event after reasoning began; else of the last
    reasoning event (a reply that only thought); None without reasoning."""
    seen, last = False, None
    for channel, start, end in spans:
        if channel == REASONING:
            seen, last = True, events[end - 1] if end > start else events[start]
        elif seen:
            return events[start]
    return last


def _reasoning_count(rec: RequestRecord, from_events: int) -> None:
    if rec.reasoning_tokens is not None:
        rec.n_reasoning, rec.n_reasoning_source = rec.reasoning_tokens, "usage"
    else:
        rec.n_reasoning, rec.n_reasoning_source = from_events, "events"


def _answer_count(rec: RequestRecord, from_events: int) -> None:
    """From usage when it gives the whole output and the reasoning part and there are no tool
    calls (whose tokens usage does not separate); else counted from events."""
    usage_total = rec.n_out if rec.n_out_source == "usage" else None
    if usage_total is not None and rec.n_reasoning_source == "usage" and rec.n_tool is None:
        rec.n_answer, rec.n_answer_source = max(usage_total - (rec.n_reasoning or 0), 0), "usage"
    else:
        rec.n_answer, rec.n_answer_source = from_events, "events"
