"""The per-second series against a plain per-second recount of the same requests."""

from __future__ import annotations

import random

import numpy as np

from loadkit.stats import series as series_mod
from loadkit.stats.series import NS_PER_S, Series

T0 = 1_700_000_000 * NS_PER_S


def _requests(rng: random.Random, n: int, span_s: int) -> list[tuple[int, int, bool, int]]:
    out = []
    for _ in range(n):
        start = T0 + rng.randrange(span_s * NS_PER_S)
        end = start + rng.randrange(5 * NS_PER_S)
        ok = rng.random() < 0.9
        out.append((start, end, ok, rng.randrange(1, 500) if ok else 0))
    return out


def _add(series: Series, reqs: list[tuple[int, int, bool, int]]) -> None:
    cols = list(zip(*reqs, strict=True))
    series.add_batch(*(np.array(c, dtype=np.int64) for c in cols))


def _recount(reqs: list[tuple[int, int, bool, int]]) -> dict[str, list]:
    """Integrate in-flight at 1 ms resolution, count completions per second: the definition."""
    first = min(s for s, *_ in reqs) // NS_PER_S
    last = max(e for _, e, *_ in reqs) // NS_PER_S
    n = last - first + 1
    requests, ok, tokens = [0] * n, [0] * n, [0] * n
    in_flight = [0.0] * n
    for s, e, good, k in reqs:
        i = e // NS_PER_S - first
        requests[i] += 1
        ok[i] += good
        tokens[i] += k
        # time open in each second it spans
        sec = s // NS_PER_S
        while sec * NS_PER_S < e or sec == s // NS_PER_S:
            lo, hi = max(s, sec * NS_PER_S), min(e, (sec + 1) * NS_PER_S)
            in_flight[sec - first] += max(0, hi - lo) / NS_PER_S
            sec += 1
            if sec * NS_PER_S >= e:
                break
    return {"requests": requests, "ok": ok, "output_tokens": tokens, "in_flight": in_flight}


def test_columns_equal_a_plain_recount_across_batches_and_merges():
    rng = random.Random(7)
    reqs = _requests(rng, 3000, 700)  # spans several storage blocks
    a, b = Series(), Series()
    _add(a, reqs[:1000])
    _add(a, reqs[1000:1500])
    _add(b, reqs[1500:])
    a.merge(b)
    got = a.columns(T0 // NS_PER_S)
    want = _recount(reqs)
    assert got["requests"] == want["requests"]
    assert got["ok"] == want["ok"]
    assert got["output_tokens"] == want["output_tokens"]
    assert np.allclose(got["in_flight"], want["in_flight"], atol=2e-3)
    assert got["unix"][0] == min(s for s, *_ in reqs) // NS_PER_S
    # the wire form round-trips, and applying deltas on a master rebuilds the same columns
    assert Series.from_wire(a.to_wire()).columns(0) == a.columns(0)


def test_deltas_carry_only_touched_rows_and_rebuild_the_series():
    rng = random.Random(3)
    worker, master = Series(), Series()
    sizes = []
    for k in range(10):
        base = T0 + k * 10 * NS_PER_S
        _add(worker, [(base + rng.randrange(NS_PER_S), base + 2 * NS_PER_S, True, 3) for _ in range(50)])
        delta = worker.delta_to_wire()
        sizes.append(len(delta))
        master.apply_rows(delta, worker.dropped)
    assert max(sizes) <= 4  # this interval's 2 seconds + the previous interval's re-sent
    assert master.columns(0) == worker.columns(0)


def test_rows_past_the_cap_count_each_request_once_as_dropped(monkeypatch):
    monkeypatch.setattr(series_mod, "MAX_CHUNKS", 2)
    s = Series()
    chunk = series_mod.CHUNK
    reqs = [(T0 + i * chunk * NS_PER_S, T0 + i * chunk * NS_PER_S + 1, True, 1) for i in range(5)]
    _add(s, reqs)
    assert sum(s.columns(0)["requests"]) + s.dropped == 5
    assert s.dropped == 3


def test_storage_is_a_few_dozen_bytes_a_second():
    s = Series()
    _add(s, [(T0 + i * NS_PER_S, T0 + i * NS_PER_S + 10, True, 5) for i in range(3600)])
    stored = sum(block.nbytes for block in s.chunks.values())
    assert stored <= 3600 * 48 + series_mod.CHUNK * 48
    assert len(s) == 3600
