"""Score each self-check window of a run against the simulator's truth log.

The run: ``locust ... --raw-log --raw-log-events`` with ``LOADKIT_SELFCHECK_TRACE=TRACE``
against ``loadkit sim --truth-log TRUTH``. For every judged window (one trace line) this
prints the verdict and the measures it was judged on next to what the truth says of the
same span: TTFT and ITL error p99 and the share of samples off by over 1 ms. A verdict the
figures contradict shows as "saturated" next to a truth p99 well under 1 ms.

    python benchmarks/score_selfcheck_trace.py --report-dir r --truth truth.jsonl --trace trace.jsonl

Errors are per server write (the truth log stamps each write): a write the client saw as two
token events (the simulator's reasoning / answer split, its ``t_first_answer_ns``) is scored
once, by its answer part.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def samples(report_dir: Path, truth_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(t_seen_ns, error_ns) of every first token and of every ITL sample of the ok requests."""
    truth = {}
    for line in truth_path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            truth[row["request_id"]] = row
    ttft, itl = [], []
    for path in sorted(report_dir.glob("requests*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line) if line.strip() else None
            if r is None or r["outcome"] != "ok" or r["request_id"] not in truth:
                continue
            t = truth[r["request_id"]]
            seen, sent = (
                np.asarray(r["event_t_ns"], dtype=np.int64),
                np.asarray(t["t_token_ns"], dtype=np.int64),
            )
            if len(seen) == len(sent) + 1 and t.get("t_first_answer_ns") in t["t_token_ns"]:
                seen = np.delete(seen, t["t_token_ns"].index(t["t_first_answer_ns"]))
            if len(seen) != len(sent) or not len(seen):
                continue
            ttft.append((seen[0], seen[0] - sent[0]))
            itl.extend(zip(seen[1:], np.abs(np.diff(seen) - np.diff(sent)), strict=True))
    return np.array(ttft, dtype=np.int64).reshape(-1, 2), np.array(itl, dtype=np.int64).reshape(-1, 2)


def truth_of(rows: np.ndarray, lo: float, hi: float) -> str:
    sel = rows[(rows[:, 0] > lo) & (rows[:, 0] <= hi), 1] if len(rows) else rows
    if not len(sel):
        return "n=0"
    return f"n={len(sel)} p99 {np.percentile(sel, 99) / 1e6:.3f} ms, >1ms {100 * np.mean(sel > 1e6):.2f}%"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--report-dir", type=Path, required=True, help="the run's --report-dir (raw log with events)"
    )
    p.add_argument("--truth", type=Path, required=True, help="the simulator's --truth-log")
    p.add_argument("--trace", type=Path, required=True, help="the LOADKIT_SELFCHECK_TRACE file")
    args = p.parse_args()
    ttft, itl = samples(args.report_dir, args.truth)
    print("verdict      cause   cpu%  wait%  late%  coal%  lateco%  client%  | truth ITL | truth TTFT")
    for line in args.trace.read_text().splitlines():
        w = json.loads(line)
        end = w.get("t_mono_ns")
        span = ("", "") if end is None else (truth_of(itl, end - w["span_s"] * 1e9, end),
                                               truth_of(ttft, end - w["span_s"] * 1e9, end))  # fmt: skip
        verdict = "saturated" if w["saturated"] else "server" if w["server"] else "fine"
        print(f"{verdict:12s} {str(w['cause'] or '-'):7s} {w['cpu_pct']:5.1f} {pct(w.get('wait_pct')):>6s} "
              f"{pct(w.get('late_pct')):>6s} {pct(w.get('coalesced_event_pct')):>6s} "
              f"{pct(w.get('late_coalesced_event_pct')):>8s} {pct(w.get('client_coalesced_event_pct')):>8s}  | "
              f"{span[0]} | {span[1]}  {','.join(w['reasons'])}")  # fmt: skip


if __name__ == "__main__":
    main()
