"""Output channels of one reply: reasoning, answer and tool calls, as a parser saw them.

A parser keeps a ``ChannelMarks``: the index (into the record's event list) at which each run
of one channel starts. It is touched only when the channel changes, so the per-event cost of a
plain answer stream is one comparison. The stream timer binds ``events`` to the record's
arrival list before the first message and calls ``apply_channels`` once, at the end
(loadkit/client/channels.py): the times and token counts per channel are worked out there, per
request, not per event. ``ThinkTags`` (loadkit/engines/channels.py) splits ``<think>`` tags.

An event that carries reasoning and answer text at once (a reasoning parser splitting one
delta at ``</think>``) marks both channels at its arrival; its tokens count to the answer.
"""

from __future__ import annotations

from typing import Any

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
