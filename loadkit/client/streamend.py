"""How a stream with outcome ok ended, and when a clean close without the end marker is one.

Many OpenAI-compatible servers send no ``data: [DONE]``: they end the body right after the
chunk that carries the ``finish_reason`` (and usage). The per-adapter rules are in
docs/engines.md; this is the one place that decides, once per request, at close time.
"""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord

# RequestRecord.end of an ok request: the protocol's end marker, or a clean close of the body
# after the engine's last message.
END_MARKER = "marker"
END_CLOSE = "close"


def close_is_normal_end(adapter: Any, parser: Any, record: RequestRecord) -> bool:
    """The body closed cleanly without the end marker: a normal end for engines that have no
    marker (Triton's ``end_on_close``), after a message that carried a finish_reason, or after
    the parser's final message (``end_seen()``: OpenAI's usage-only chunk). The finish_reason
    is the one the timer already keeps from each message's metadata: no per-event work."""
    if getattr(adapter, "end_on_close", False) or record.finish_reason is not None:
        return True
    end_seen = getattr(parser, "end_seen", None)  # parsers duck-typed by plugins may lack it
    return bool(end_seen is not None and end_seen())
