"""Two parts of a target's ``lengths`` recomputed from the raw log: the latencies per input-length
bucket (``by_input_tokens``) and the expected against realised reasoning split (``reasoning``).

Buckets (docs/reports.md, "Lengths"): every request whose server counted its prompt (``n_in``)
falls in one bucket by that count; the edges are the report's own, restated here (the oracle
does not import the stats code): ``<256``, ``256–1k``, ``1k–4k``, ``4k–16k``, ``≥16k``, each
from its low edge up to, not including, the next. A bucket is listed when it has a request, in
length order, with its ``requests``, ``ok`` and TTFT / TPOT / E2E p50, p90, p99 of the ok ones.

Reasoning split (a workload that carried an expected split, ServeGen's ``reason_ratio``): over
the requests with an ``expected_reasoning_tokens`` and a ``max_tokens``, the expected share
Σ expected / Σ max_tokens; over the ``measured`` ones (ok, with ``n_reasoning`` and ``n_out``)
the expected share of those and the realised share Σ n_reasoning / Σ n_out; their difference.
"""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import NS_UNIT_MS, Verdict, compare_summary
from loadkit.verify.figures import NS_PER_MS, request_times_ns

# (lowest input tokens, label) of each bucket; the last is open-ended.
INPUT_BUCKETS = ((0, "<256"), (256, "256–1k"), (1024, "1k–4k"), (4096, "4k–16k"), (16384, "≥16k"))
BUCKET_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms", "ttfat_ms")
THREE = (("p50", 500), ("p90", 900), ("p99", 990))


def bucket_of(n_in: int) -> int:
    """The index of the bucket ``n_in`` input tokens fall in."""
    index = 0
    for i, (low, _) in enumerate(INPUT_BUCKETS):
        if n_in >= low:
            index = i
    return index


def check_buckets(v: Verdict, engine: str, report: Any, rows: list[dict[str, Any]]) -> None:
    s = "lengths"
    if report is None:
        v.exact(s, engine, "by_input_tokens", "missing", "present")
        return
    mine: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if r["n_in"] is not None:
            mine.setdefault(bucket_of(r["n_in"]), []).append(r)
    listed = [row.get("bucket") for row in report] if isinstance(report, list) else report
    v.exact(s, engine, "by_input_tokens buckets", listed, [INPUT_BUCKETS[i][1] for i in sorted(mine)])
    if not isinstance(report, list):
        return
    by_label = {row.get("bucket"): row for row in report}
    for i, bucket_rows in sorted(mine.items()):
        low, label = INPUT_BUCKETS[i]
        row = by_label.get(label)
        if row is None:
            continue  # named by the buckets figure
        key = f"{engine} / by_input_tokens {label}"
        high = INPUT_BUCKETS[i + 1][0] if i + 1 < len(INPUT_BUCKETS) else None
        v.exact(
            s, key, "min_tokens, below_tokens", [row.get("min_tokens"), row.get("below_tokens")], [low, high]
        )
        ok = [r for r in bucket_rows if r["outcome"] == "ok"]
        v.exact(s, key, "requests", row.get("requests"), len(bucket_rows))
        v.exact(s, key, "ok", row.get("ok"), len(ok))
        values: dict[str, list[float]] = {m: [] for m in BUCKET_METRICS}
        for r in ok:
            times = request_times_ns(r)
            for m in BUCKET_METRICS:
                if times[m] is not None:
                    values[m].append(times[m] / NS_PER_MS)  # type: ignore[operator]
        for m in BUCKET_METRICS:
            compare_summary(v, s, key, m, row.get(m) or {}, sorted(values[m]), NS_UNIT_MS, THREE)


def check_reasoning(v: Verdict, engine: str, report: Any, rows: list[dict[str, Any]]) -> bool:
    """The ``reasoning`` split of one target; False when the raw log lacks what it takes."""
    s = "lengths"
    if any("expected_reasoning_tokens" not in r for r in rows):
        return False
    carried = [
        r for r in rows if r.get("expected_reasoning_tokens") is not None and r.get("max_tokens") is not None
    ]
    if not carried:
        v.exact(s, engine, "reasoning", report, None)
        return True
    if not isinstance(report, dict):
        v.exact(s, engine, "reasoning", "missing" if report is None else report, "present")
        return True
    measured = [r for r in carried if r["outcome"] == "ok" and r.get("n_reasoning") is not None
                and r["n_out"] is not None]  # fmt: skip
    expected = sum(r["expected_reasoning_tokens"] for r in carried)
    asked = sum(r["max_tokens"] for r in carried)
    m_expected = sum(r["expected_reasoning_tokens"] for r in measured)
    m_asked = sum(r["max_tokens"] for r in measured)
    reasoning = sum(r["n_reasoning"] for r in measured)
    output = sum(r["n_out"] for r in measured)
    expected_measured = m_expected / m_asked if m_asked else None
    realised = reasoning / output if output else None
    key = f"{engine} / reasoning"
    v.exact(s, key, "requests", report.get("requests"), len(carried))
    v.exact(s, key, "measured", report.get("measured"), len(measured))
    for figure, mine in (
        ("expected_share", expected / asked if asked else None),
        ("expected_reasoning_tokens_mean", expected / len(carried)),
        ("expected_share_measured", expected_measured),
        ("realised_share", realised),
        ("realised_reasoning_tokens_mean", reasoning / len(measured) if measured else None),
        (
            "share_error",
            None if realised is None or expected_measured is None else realised - expected_measured,
        ),
    ):
        got = report.get(figure)
        if mine is None or got is None:
            v.exact(s, key, figure, got, mine)
        else:
            v.close(s, key, figure, got, mine, 0.0, False)
    return True
