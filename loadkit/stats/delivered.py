"""Delivered load: what the run actually sent, per target and stage, beside what was asked.

Every node keeps its requests' send and end times (Unix ns, so nodes' clocks line up), their
schedule lag and the user classes that sent them; the master merges them and reports, per
(target, stage): the asked and realised rate and inter-arrival CV (``arrival.realised_stats``
on the merged send times), a Kolmogorov–Smirnov test of the realised gaps against the asked
distribution at the client's scheduling resolution (stats/asked.py: what "asked" is per user
class, load shape step, trace cut and unknown pacing), and the concurrency reached (peak and
time-averaged in-flight requests). Lengths asked vs realised per target come from the
``lengths`` section (lengthstats.py).

Per key at most ``CAP`` requests are kept (the first ones), so a long run's snapshots stay
small; the section says when it is a prefix of the run.

On the wire the lists only grow, so a worker's periodic snapshot carries them as a delta
(``delta_to_wire``): per key, the requests from the count its snapshot before the previous one
had (sent twice, like the time series' rows, so one snapshot the master never got costs
nothing), with that start (``from``, ``lag_from``). The master keeps one running state per
worker and appends each delta's new part to it once (``continued``): a request is appended
only beyond what the master holds, so an overlap never counts twice. A delta that starts
beyond it (two snapshots in a row lost: a reconnection) is not applied; that key waits, marked
``missing_deltas``, for the next full section: every ``FULL_EVERY``-th periodic snapshot and
the final one carry everything, and replace what the master held. A worker lost in between
keeps what the master held of it (its last contiguous snapshot).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from loadkit.stats import wallclock
from loadkit.stats.asked import ALPHA, SCHEDULED, asked_for, fit_test, resolution_ms
from loadkit.stats.servegenwindows import console_lines as servegen_lines
from loadkit.stats.servegenwindows import windows_table
from loadkit.workload.arrival import realised_stats
from loadkit.workload.warmcache import WARMUP_STAGE

__all__ = ["ALPHA", "CAP", "SCHEDULED", "DeliveredLoad", "console_lines", "one_context"]
CAP = 20_000
NS = 1_000_000_000
FULL_EVERY = 20  # a worker's periodic snapshots: one full section per 20 (a minute at 3 s)
# The asked context of one target given the classes that sent to it (stats/asked.py).
Contexts = Callable[[str, list[str]], dict[str, Any]]


def one_context(arrival: dict[str, Any] | None, offsets: list[float] | None = None) -> Contexts:
    """Every target asked one arrival process (and, for a trace, its offsets)."""
    context = {"arrival": dict(arrival or {"model": "closed"}), "offsets": offsets}
    return lambda _target, _classes: context


def _us_to_ns(values: list[Any], base: int) -> list[int]:
    """``[base + int(u) * 1000 for u in values]``, vectorised (Unix ns fit in int64)."""
    return (np.asarray(values, dtype=np.int64) * 1000 + base).tolist()


class DeliveredLoad:
    """This node's (or, merged, the run's) send/end times per (target, stage)."""

    def __init__(self) -> None:
        self.wall_offset_ns = wallclock.wall_offset_ns()
        self.sends: dict[tuple[str, str], list[int]] = {}
        self.ends: dict[tuple[str, str], list[int]] = {}
        # Whether each request had a scheduled time: in open loop only those are arrivals (a
        # session's later turns follow its think time, not the arrival process).
        self.scheduled: dict[tuple[str, str], list[bool]] = {}
        self.truncated: dict[tuple[str, str], int] = {}
        self.lags: dict[tuple[str, str], list[int]] = {}  # t_send − t_sched (ns) of scheduled sends
        self.classes: dict[tuple[str, str], set[str]] = {}  # the user classes that sent them
        # Master side, a worker's running state: keys whose deltas stopped fitting (a gap).
        self.missing: set[tuple[str, str]] = set()
        # Decoded from the wire: whether it was a full section, and where each delta key starts.
        self.full = True
        self.starts: dict[tuple[str, str], tuple[int, int]] = {}
        # Worker side: (sends, lags) per key when the previous two snapshots were taken.
        self._marks: tuple[dict[tuple[str, str], tuple[int, int]], ...] = ({}, {})
        self._deltas = 0

    def add(self, record: Any) -> None:
        key = (record.engine, record.stage or "run")
        sends = self.sends.setdefault(key, [])
        if len(sends) >= CAP:
            self.truncated[key] = self.truncated.get(key, 0) + 1
            return
        send = record.t_send_ns + self.wall_offset_ns
        sends.append(send)
        end = record.t_end_ns
        self.ends.setdefault(key, []).append(send if end is None else end + self.wall_offset_ns)
        self.scheduled.setdefault(key, []).append(record.t_sched_ns is not None)
        if record.t_sched_ns is not None:
            self.lags.setdefault(key, []).append(record.t_send_ns - record.t_sched_ns)
        if getattr(record, "user_class", None):
            self.classes.setdefault(key, set()).add(record.user_class)

    def merge(self, other: DeliveredLoad) -> None:
        for key, sends in other.sends.items():
            self.sends.setdefault(key, []).extend(sends)
            self.ends.setdefault(key, []).extend(other.ends[key])
            self.scheduled.setdefault(key, []).extend(other.scheduled[key])
            self.lags.setdefault(key, []).extend(other.lags.get(key, []))
            self.classes.setdefault(key, set()).update(other.classes.get(key, set()))
        for key, n in other.truncated.items():
            self.truncated[key] = self.truncated.get(key, 0) + n
        self.missing |= other.missing

    def to_wire(self) -> dict[str, Any]:
        """The whole section (a final snapshot's)."""
        return {"full": True, "entries": self._entries({})}

    def delta_to_wire(self) -> dict[str, Any]:
        """A periodic snapshot's section: every ``FULL_EVERY``-th (the first included) is the
        whole section, the others the requests since the snapshot before the previous one."""
        full = self._deltas % FULL_EVERY == 0
        self._deltas += 1
        entries = self._entries({} if full else self._marks[0])
        now = {key: (len(sends), len(self.lags.get(key, ()))) for key, sends in self.sends.items()}
        self._marks = (self._marks[1], now)
        return {"full": full, "entries": entries}

    def _entries(self, marks: dict[tuple[str, str], tuple[int, int]]) -> list[dict[str, Any]]:
        out = []
        for key, all_sends in self.sends.items():
            start, lag_start = marks.get(key, (0, 0))
            sends = all_sends[start:]
            # The key's first send, in a delta too: every request's µs are then the same as in
            # the whole section (the master's figures do not depend on which carried it).
            base = all_sends[0] if all_sends else 0
            out.append({"engine": key[0], "stage": key[1], "base": base, "from": start, "lag_from": lag_start,
                        "send_us": [(s - base) // 1000 for s in sends],
                        "end_us": [(e - base) // 1000 for e in self.ends[key][start:]],
                        "scheduled": [int(b) for b in self.scheduled[key][start:]],
                        "lag_us": [lag // 1000 for lag in self.lags.get(key, [])[lag_start:]],
                        "classes": sorted(self.classes.get(key, ())),
                        "truncated": self.truncated.get(key, 0)})  # fmt: skip
        return out

    def continued(self, previous: DeliveredLoad | None) -> DeliveredLoad:
        """Master side: the worker's running state once this decoded section is applied to
        ``previous`` (its state before, same epoch; None: none). A full section replaces it; a
        delta's requests beyond what ``previous`` holds are appended to it (in place)."""
        if self.full:
            return self
        state = DeliveredLoad() if previous is None else previous
        for key, sends in self.sends.items():
            start, lag_start = self.starts[key]
            have, lags_held = len(state.sends.get(key, ())), len(state.lags.get(key, ()))
            if key in state.missing or start > have or lag_start > lags_held:
                state.missing.add(key)  # snapshots this master never got: wait for a full one
                continue
            skip, lag_skip = have - start, lags_held - lag_start
            state.sends.setdefault(key, []).extend(sends[skip:])
            state.ends.setdefault(key, []).extend(self.ends[key][skip:])
            state.scheduled.setdefault(key, []).extend(self.scheduled[key][skip:])
            state.lags.setdefault(key, []).extend(self.lags[key][lag_skip:])
            state.classes[key] = self.classes[key]
            if key in self.truncated:
                state.truncated[key] = self.truncated[key]
        return state

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> DeliveredLoad:
        if not isinstance(data, dict):
            raise ValueError(f"delivered-load section is a {type(data).__name__}, not a dict")
        out = cls()
        out.full = bool(data["full"])
        for item in data["entries"]:
            key, base = (str(item["engine"]), str(item["stage"])), int(item["base"])
            start, lag_start = int(item.get("from", 0)), int(item.get("lag_from", 0))
            if start < 0 or lag_start < 0 or (out.full and (start or lag_start)):
                raise ValueError(f"delivered-load entry {key} starts at {start}/{lag_start}")
            out.starts[key] = (start, lag_start)
            # In numpy, then back to Python ints: a master decodes up to CAP of each per worker
            # snapshot (every 3 s); 8 ms instead of 12 for a full entry (loaded 2-core VM).
            out.sends[key] = _us_to_ns(item["send_us"], base)
            out.ends[key] = _us_to_ns(item["end_us"], base)
            out.scheduled[key] = np.asarray(item["scheduled"], dtype=np.int64).astype(bool).tolist()
            out.lags[key] = _us_to_ns(item.get("lag_us", []), 0)
            out.classes[key] = {str(c) for c in item.get("classes", [])}
            if item.get("truncated"):
                out.truncated[key] = int(item["truncated"])
        return out

    def report(
        self,
        contexts: Contexts,
        lengths: dict[str, Any] | None = None,
        stage_users: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        """The ``delivered`` section: asked vs realised per target and stage (docs/reports.md).
        ``contexts(target, classes)`` says what the classes sending to a target asked of it;
        ``stage_users`` a load shape's users per step."""
        by_target: dict[str, Any] = {}
        models = set()
        for (engine, stage), sends in sorted(self.sends.items()):
            context = dict(contexts(engine, sorted(self.classes.get((engine, stage), ()))))
            if stage_users and stage in stage_users:
                context["users"] = stage_users[stage]
            row = stage_row(
                context,
                stage,
                np.asarray(sends, dtype=np.int64),
                np.asarray(self.ends[(engine, stage)], dtype=np.int64),
                np.asarray(self.scheduled[(engine, stage)], dtype=bool),
                np.asarray(self.lags.get((engine, stage), []), dtype=np.int64),
            )
            row["truncated_requests"] = self.truncated.get((engine, stage), 0)
            if row["truncated_requests"] and row.get("servegen"):
                kept = (
                    f"the section keeps the first {len(sends)} requests only: later windows show fewer "
                    "realised arrivals than were sent"
                )
                row["servegen"]["note"] = "; ".join(filter(None, (row["servegen"].get("note"), kept)))
            row["user_classes"] = sorted(self.classes.get((engine, stage), ()))
            if (engine, stage) in self.missing:  # only then: the reports of complete runs unchanged
                row["missing_deltas"] = True
            models.add(row["asked"]["model"])
            by_target.setdefault(engine, {"stages": {}})["stages"][stage] = row
        for engine, section in by_target.items():
            section["lengths"] = _lengths_pair((lengths or {}).get(engine))
        model = next(iter(models)) if len(models) == 1 else ("mixed" if models else None)
        return {"arrival_model": model, "alpha": ALPHA, "by_target": by_target}


def stage_row(
    context: dict[str, Any],
    stage: str,
    sends: np.ndarray,
    ends: np.ndarray,
    scheduled: np.ndarray,
    lags: np.ndarray,
) -> dict[str, Any]:
    """One (target, stage): asked, realised, the fit test and the concurrency reached."""
    arrivals = np.sort(sends[scheduled] if scheduled.any() else sends)
    offsets = ((arrivals - arrivals[0]) / NS).tolist() if len(arrivals) else []
    realised = realised_stats(offsets)
    asked = asked_for(context, stage)
    gaps = np.diff(np.asarray(offsets))
    resolution = resolution_ms(lags)
    row = {"requests": int(len(sends)), "arrivals": len(offsets), "asked": asked,
           "realised": {"rate": realised["rate"], "cv": realised["cv"]},
           "rate_error": _rel(realised["rate"], asked.get("rate")),
           "fit": fit_test(context, asked, gaps, resolution),
           "concurrency": concurrency(sends, ends)}  # fmt: skip
    if context.get("servegen") and stage != WARMUP_STAGE:
        row["servegen"] = windows_table(context, sends, scheduled, lags, resolution)
        said = "asked is the schedule synthesised from the ServeGen file: per window below, file vs synthesised vs realised"
        asked["note"] = f"{asked['note']}; {said}" if asked.get("note") else said
    return row


def concurrency(sends: np.ndarray, ends: np.ndarray) -> dict[str, Any]:
    """Peak requests in flight (an end at the same ns as a send frees its slot first) and the
    time average over the stage (Little's law: Σ durations / span)."""
    if len(sends) == 0:
        return {"peak": None, "mean": None}
    times = np.concatenate([sends, ends])
    steps = np.concatenate([np.ones(len(sends)), -np.ones(len(ends))])
    order = np.lexsort((steps, times))
    peak = int(np.cumsum(steps[order]).max())
    span = float(ends.max() - sends.min())
    mean = float((ends - sends).sum() / span) if span > 0 else None
    return {"peak": peak, "mean": mean}


def _lengths_pair(target: dict[str, Any] | None) -> dict[str, Any] | None:
    """Asked vs realised length means and p50s of one target, from the lengths section."""
    if not target:
        return None
    pairs = {
        "input_tokens": ("input_target", "input_server"),
        "output_tokens": ("output_asked", "output_server"),
    }
    out = {}
    for name, (asked, got) in pairs.items():
        a, r = target.get(asked) or {}, target.get(got) or {}
        out[name] = {"asked_mean": a.get("mean"), "realised_mean": r.get("mean"),
                     "asked_p50": a.get("p50"), "realised_p50": r.get("p50")}  # fmt: skip
    split = target.get("reasoning")
    if split:  # the expected reasoning share (ServeGen reason_ratio) beside the realised one
        out["reasoning_share"] = {"expected": split["expected_share_measured"], "realised": split["realised_share"],
                                  "error": split["share_error"], "note": split["note"]}  # fmt: skip
    return out


def _rel(value: float | None, ref: float | None) -> float | None:
    return None if value is None or not ref else value / ref - 1.0


def console_lines(report: dict[str, Any]) -> list[str]:
    """One line per target and stage for the console summary."""
    section = report.get("delivered") or {}
    lines = []
    for engine, target in (section.get("by_target") or {}).items():
        for stage, row in target["stages"].items():
            asked, got, fit = row["asked"], row["realised"], row["fit"]
            windows = row.get("servegen")
            # A ServeGen stage's asked is loadkit's synthesis: its fit judges the client, not the file.
            what = "as synthesised" if windows else "as asked"
            test = (
                ""
                if fit.get("test") is None
                else f", {fit['test']} at {fit['resolution_ms']:g} ms p={fit['p_value']:.3f}"
                f"{(' (' + what + ')') if windows and fit['consistent'] else ''}"
                f"{'' if fit['consistent'] else f' (NOT {what})'}"
            )
            note = f" ({asked['note']})" if asked.get("note") else ""
            lines.append(
                f"delivered {engine}/{stage}: rate {_f(got['rate'])}/s ({_asked_rate(asked, bool(windows))}), "
                f"CV {_f(got['cv'])} (asked {_f(asked.get('cv'))}){test}, "
                f"in flight peak {row['concurrency']['peak']}{note}"
            )
            if windows:
                lines += servegen_lines(engine, stage, windows)
    return lines


def _asked_rate(asked: dict[str, Any], synthesised: bool = False) -> str:
    """What was asked, in words where it is not a rate (closed loop, unknown pacing, a ramp)."""
    model = asked.get("model")
    if synthesised:
        return f"asked the synthesised ServeGen schedule {_f(asked.get('rate'))}"
    if model == "not asked":
        return f"not asked: {asked.get('reason')}"
    if model == "closed":
        users = asked.get("users")
        return "asked closed loop" + (f" at {users} users" if users is not None else "")
    if asked.get("ramp"):
        return f"asked a ramp {_f(asked['ramp'][0])}→{_f(asked['ramp'][1])}/s"
    return f"asked {model} {_f(asked.get('rate'))}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
