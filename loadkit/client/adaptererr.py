"""An engine adapter's own code raised: the request's outcome is ``adapter_error``.

A parser says it cannot understand a message by raising ``MalformedEvent`` (the request is
``malformed_stream``). Anything else raised by the adapter's code on a request's path
(``build_request``, ``new_parser``, ``bind_channels``, ``parse``, ``end_seen``) is a bug in the
adapter, most often in a third-party plugin. Left alone, such an exception went up through
the user's task: the request was recorded ``cancelled`` (no failure, a valid report, no plugin
named) and Locust printed a traceback per request. Here it becomes the request's outcome,
with one line naming the engine, the plugin that registered it, the adapter class, the call
that raised and the exception.

The traceback of the first failure of each kind (adapter class, exception type and the line
that raised) in a process is kept for the report (``report.json`` ``adapter_errors``); later
ones of that kind are only counted, so an adapter failing on every request costs no
formatting per request. ``forget_kinds`` starts over (at each test start).
"""

from __future__ import annotations

import traceback
from types import TracebackType
from typing import Any

MAX_KINDS = 64  # kinds whose first traceback this process keeps
TRACEBACK_CHARS = 8000

_kinds: set[tuple[Any, ...]] = set()


def forget_kinds() -> None:
    """A new run: the first failure of each kind keeps its traceback again."""
    _kinds.clear()


def origin(adapter: Any) -> str:
    """Who provides ``adapter``: the plugin (distribution and version) that registered its
    engine, and its class; never raises."""
    cls = type(adapter)
    where = f"{cls.__module__}.{cls.__qualname__}"
    try:
        from loadkit.plugins import engine_registry

        info = engine_registry().get(getattr(adapter, "name", ""))
    except Exception:  # naming the plugin must not become a failure of its own
        info = None
    if info is not None and isinstance(adapter, info.adapter):
        return f"plugin {info.plugin} {info.version}, adapter {where}"
    return f"adapter {where}, not a registered engine"


def describe(adapter: Any, call: str, exc: BaseException) -> tuple[str, str | None]:
    """The request's error line, and the traceback when this is the first of its kind here."""
    name = getattr(adapter, "name", "") or "?"
    text = " ".join(str(exc).split())
    message = f"engine {name!r} ({origin(adapter)}): {call} raised {type(exc).__name__}" + (
        f": {text}" if text else ""
    )
    return message, _first_traceback(type(adapter), exc)


def _first_traceback(cls: type, exc: BaseException) -> str | None:
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    kind = (cls, type(exc), tb.tb_frame.f_code.co_filename if tb else None, tb.tb_lineno if tb else None)
    if kind in _kinds or len(_kinds) >= MAX_KINDS:
        return None
    _kinds.add(kind)
    text = "".join(traceback.format_exception(exc))
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-(TRACEBACK_CHARS - 1) :]
