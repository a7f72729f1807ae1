"""Each engine's ``timeseries`` second by second, from raw-log lines that state their process's
wall-clock offset (``t_wall_offset_ns``): docs/metrics.md defines the rows as Unix seconds of
that wall clock; a request counts in the second its end falls in (its end, else its last
token, else its start; never before its start): ``requests``, ``ok`` and the ok requests'
``output_tokens``; ``in_flight`` is the time-average of the requests open in that second, each
open from its start (connection set-up included) to that end. Every second from the first to
the last one a request touched is a row (zeros included)."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import Verdict
from loadkit.verify.rates import has_wall_offsets, request_span

NS_PER_S = 1_000_000_000
IN_FLIGHT_UNIT = 0.0005  # the report rounds in_flight to 3 decimals


def check_timeseries(v: Verdict, engine: str, ts: dict[str, Any], rows: list[dict[str, Any]]) -> bool:
    """Compare ``ts`` row by row; False (nothing compared) when some line has no offset."""
    if not has_wall_offsets(rows) or not isinstance(ts.get("unix"), list):
        return False
    spans = []
    for r in rows:
        span = request_span(r)
        if span is None:
            continue
        offset = r["t_wall_offset_ns"]
        spans.append((span[0] + offset, span[1] + offset, r))
    if not spans:
        return True
    first = min(s for s, _, _ in spans) // NS_PER_S
    last = max(e for _, e, _ in spans) // NS_PER_S
    seconds = list(range(first, last + 1))
    counts = {name: [0] * len(seconds) for name in ("requests", "ok", "output_tokens")}
    open_ns = [0] * len(seconds)
    for start, end, r in spans:
        at = end // NS_PER_S - first
        counts["requests"][at] += 1
        if r["outcome"] == "ok":
            counts["ok"][at] += 1
            counts["output_tokens"][at] += r["n_out"] or 0
        for sec in range(start // NS_PER_S, end // NS_PER_S + 1):  # the seconds it was open in
            lo, hi = max(start, sec * NS_PER_S), min(end, (sec + 1) * NS_PER_S)
            open_ns[sec - first] += max(hi - lo, 0)
    v.exact("timeseries", engine, "unix (every second from the first to the last)", ts.get("unix"), seconds)
    if ts.get("unix") != seconds:
        return True
    for name, mine in counts.items():
        v.exact("timeseries", engine, f"{name} per second", ts.get(name), mine)
    got = ts.get("in_flight") or []
    for sec, (report, ns) in enumerate(zip(got, open_ns, strict=False)):
        v.close(
            "timeseries",
            engine,
            f"in_flight at unix {seconds[sec]}",
            report,
            ns / NS_PER_S,
            IN_FLIGHT_UNIT,
            False,
        )
    v.exact("timeseries", engine, "in_flight rows", len(got), len(seconds))
    return True
