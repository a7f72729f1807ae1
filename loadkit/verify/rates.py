"""Windows and rates: the report divides counts by each group's window, first start to last
end (docs/metrics.md: the window runs from t_start, connection set-up included). The report
takes those times on the wall clock, the raw log on the monotonic one; one process converts
one to the other with a single offset, so its windows can be recomputed exactly. Several
processes on the master's machine (``--processes``, or workers started there) share its
monotonic clock, and each measured its own offset from the wall clock: their windows agree up
to the difference of those offsets, bounded here by SAME_HOST_SLACK_S (the two clock reads of
one offset are consecutive calls; a process descheduled between them on a loaded machine is
what the slack allows for). Workers on other machines share no clock: left unchecked.

Raw logs written since the field exists carry each line's ``t_wall_offset_ns``: the offset its
process's stats put the engine and label windows on the wall clock with. With it on every line
the oracle puts each time on that same wall clock (``wall_ns``), and those windows are exact
for any number of processes on any machines (``engine_slack_s`` 0)."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import Verdict
from loadkit.verify.rawlog import Run
from loadkit.verify.recompute import Figures

NS_PER_S = 1_000_000_000
SAME_HOST_SLACK_S = 0.005


def one_process(rows: list[dict[str, Any]]) -> bool:
    return len({r.get("worker") for r in rows}) <= 1


def clock_slack_s(run: Run) -> float | None:
    """How far the report's windows may lie from the raw log's: 0 for one process, the
    same-host slack for processes all on the master's machine (Locust names a worker
    ``<hostname>_<id>``), None when a worker ran elsewhere or the report does not say."""
    if one_process(run.rows):
        return 0.0
    host = (run.manifest.get("client") or {}).get("hostname")
    nodes = (run.report.get("workers") or {}).get("nodes") or []
    if not host or not nodes:
        return None
    same = all(str(n.get("client_id", "")).rpartition("_")[0] == host for n in nodes)
    return SAME_HOST_SLACK_S if same else None


def has_wall_offsets(rows: list[dict[str, Any]]) -> bool:
    """Every line says its process's wall-clock offset (raw logs before it was added do not)."""
    return bool(rows) and all(isinstance(r.get("t_wall_offset_ns"), int) for r in rows)


def engine_slack_s(run: Run) -> float | None:
    """clock_slack_s for the engine and label windows, which the report takes with the
    offset each line states: exact (0) when every line states it."""
    return 0.0 if has_wall_offsets(run.rows) else clock_slack_s(run)


def wall_ns(row: dict[str, Any], t_ns: int) -> int:
    """A monotonic time of ``row`` on its process's wall clock (unchanged without an offset)."""
    offset = row.get("t_wall_offset_ns")
    return t_ns + offset if isinstance(offset, int) else t_ns


def window_s(rows: list[dict[str, Any]]) -> float | None:
    """Seconds from the first request's start to the last one's end (or last event, or start),
    on the wall clock when every line states its offset (one process: the same difference)."""
    wall = has_wall_offsets(rows)
    starts, ends = [], []
    for r in rows:
        span = request_span(r)
        if span is None:
            continue
        start, end = span
        starts.append(wall_ns(r, start) if wall else start)
        ends.append(wall_ns(r, end) if wall else end)
    return (max(ends) - min(starts)) / NS_PER_S if starts else None


def request_span(r: dict[str, Any]) -> tuple[int, int] | None:
    """A raw-log line's (start, end) on its process's monotonic clock: from its start (else its
    send) to its end (else its last event, else its start); None for a line never started."""
    start = r.get("t_start_ns") or r["t_send_ns"]
    if not start or start <= 0:
        return None
    end = (
        r["t_end_ns"]
        if r["t_end_ns"] is not None
        else r["t_last_ns"]
        if r["t_last_ns"] is not None
        else start
    )
    return start, max(end, start)


def compare_rates(v: Verdict, section: str, key: str, report: dict[str, Any] | None, fig: Figures,
                  seconds: float | None, slack_s: float = 0.0, with_window: bool = True) -> None:  # fmt: skip
    """window_s and the per-second rates of one group, over ``seconds`` (its engine's window),
    the window within ``slack_s`` (clock_slack_s) and each rate within what that slack moves it."""
    if report is None or seconds is None:
        return
    if with_window:
        v.close(section, key, "window_s", report.get("window_s"), seconds, 1e-9 + slack_s, False)
    c = fig.counts
    rates = [
        ("requests_per_s", c["requests"]),
        ("ok_per_s", c["ok"]),
        ("output_tokens_per_s", c["output_tokens"]),
    ]
    good = fig.slo["good"] if fig.slo is not None and not fig.slo_unknown else None
    if good is not None:
        rates.append(("goodput_per_s", good))
    for name, n in rates:
        if name in report:
            v.close(section, key, name, report[name], n / seconds, _rate_slack(n, seconds, slack_s), False)
    slo = report.get("slo")
    if good is not None and isinstance(slo, dict) and "goodput_per_s" in slo:
        v.close(section, key, "slo.goodput_per_s", slo["goodput_per_s"], good / seconds,
                _rate_slack(good, seconds, slack_s), False)  # fmt: skip


def _rate_slack(n: int, seconds: float, slack_s: float) -> float:
    """How far n / (seconds ± slack_s) may lie from n / seconds."""
    if not slack_s:
        return 0.0
    return n / max(seconds - slack_s, 1e-9) - n / seconds
