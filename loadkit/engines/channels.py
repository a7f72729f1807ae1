"""Output channels of one reply: reasoning, answer and tool calls, as a parser saw them.

A parser keeps a ``ChannelMarks``: the index (into the record's event list) at which each run
of one channel starts. It is touched only when the channel changes, so the per-event cost of a
plain answer stream is one comparison. The stream timer binds ``events`` to the record's
arrival list before the first message and calls :func:`apply_channels` once, at the end: the
times and token counts per channel are worked out there, per request, not per event.

An event that carries reasoning and answer text at once (a reasoning parser splitting one
delta at ``</think>``) marks both channels at its arrival; its tokens count to the answer.
"""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord

ANSWER, REASONING, TOOL = 0, 1, 2
CHANNEL_NAMES = ("answer", "reasoning", "tool")


class ChannelMarks:
    """Where each channel's runs start; ``events`` is the record's ``event_t_ns`` list."""

    __slots__ = ("events", "runs", "current", "tool_calls")

    def __init__(self) -> None:
        self.events: list[int] = []
        self.runs: list[tuple[int, int]] = []  # (index of the run's first event, channel)
        self.current = -1
        self.tool_calls: ToolCalls | None = None

    def switch(self, channel: int, back: int = 0) -> None:
        """The event being parsed (or the one ``back`` events before it) opens a run of
        ``channel``; call only on a change."""
        self.current = channel
        self.runs.append((max(len(self.events) - back, 0), channel))

    def tools(self) -> ToolCalls:
        if self.tool_calls is None:
            self.tool_calls = ToolCalls()
        return self.tool_calls


class ToolCalls:
    """Streamed tool calls put together: ``delta.tool_calls`` entries keyed by their index
    (id and name on the first fragment, argument text in pieces after it)."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, Any]] = {}

    def add(self, index: int, call_id: str | None, name: str | None, arguments: str) -> None:
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = {"id": None, "name": None, "arguments": []}
        if call_id:
            call["id"] = call_id
        if name:
            call["name"] = name
        if arguments:
            call["arguments"].append(arguments)  # joined once at the end: no quadratic copying

    def as_list(self) -> list[dict[str, Any]]:
        return [{**c, "arguments": "".join(c["arguments"])} for _, c in sorted(self.calls.items())]


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


OPEN_TAG, CLOSE_TAG = "<think>", "</think>"


class ThinkTags:
    """Splits answer text at ``<think>`` / ``</think>`` (``--think-tags``), for servers run
    without a reasoning parser. A tag may be split across events: a tail that could begin one
    is held back until the next event decides it. The opening tag starts the reasoning run (its
    event counts there); the closing tag ends it, and the answer begins with the next text."""

    __slots__ = ("inside", "held", "opened_before")

    def __init__(self) -> None:
        self.inside = False
        self.held = ""
        self.opened_before = False  # the last opening tag began in an earlier event

    def split(self, text: str) -> list[tuple[int, str]]:
        """``text`` as (channel, text) pieces in order; (REASONING, "") marks an opening tag."""
        carried = len(self.held)
        s, self.held = self.held + text, ""
        out: list[tuple[int, str]] = []
        while s:
            tag = CLOSE_TAG if self.inside else OPEN_TAG
            i = s.find(tag)
            if i < 0:
                keep = _partial_tail(s, tag)
                if len(s) > keep:
                    out.append((REASONING if self.inside else ANSWER, s[: len(s) - keep]))
                self.held = s[len(s) - keep :]
                break
            if i:
                out.append((REASONING if self.inside else ANSWER, s[:i]))
            if not self.inside:
                self.opened_before = i < carried
                out.append((REASONING, ""))
            self.inside = not self.inside
            s = s[i + len(tag) :]
        return out


def _partial_tail(s: str, tag: str) -> int:
    """Length of the longest tail of ``s`` that is a proper prefix of ``tag``."""
    for n in range(min(len(tag) - 1, len(s)), 0, -1):
        if tag.startswith(s[-n:]):
            return n
    return 0
