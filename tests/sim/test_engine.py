"""The step model alone: continuous batching, cost model, paged KV, preemption, prefix cache.

The scheduler has no clock; these tests keep a fake one by adding each step's duration.
"""

from __future__ import annotations

import pytest

from loadkit.sim.config import ConfigError, Profile, validate
from loadkit.sim.engine import Scheduler, Sequence
from loadkit.sim.kvcache import BlockPool, block_hashes

MS = 1_000_000


def profile(**kw: object) -> Profile:
    base = dict(
        decode_base_ms=10.0,
        decode_per_seq_ms=1.0,
        kv_read_ms_per_1k_tokens=1.0,
        prefill_us_per_token=100.0,
        max_num_seqs=4,
        max_num_batched_tokens=4096,
        num_blocks=1000,
        block_size=16,
    )
    base.update(kw)
    return validate(Profile(**base))  # type: ignore[arg-type]


def run_until_done(s: Scheduler, seqs: list[Sequence], max_steps: int = 10_000) -> dict[str, list[int]]:
    """Step until all sequences finish; returns each sequence's emission times (fake clock)."""
    clock, times = 0, {q.rid: [] for q in seqs}
    for _ in range(max_steps):
        if all(q.done for q in seqs):
            return times
        plan = s.step()
        clock += plan.duration_ns
        for q, n in plan.emissions:
            times[q.rid] += [clock] * n
    raise AssertionError("sequences did not finish")


def seq(rid: str, n_prompt: int, n_out: int, base: int = 0) -> Sequence:
    return Sequence(rid, [base + i for i in range(n_prompt)], n_out)


def test_first_token_after_prefill_then_one_per_step() -> None:
    s = Scheduler(profile())
    a = seq("a", 100, 5)
    s.add(a)
    times = run_until_done(s, [a])["a"]
    # Step 1: prefill 100 tokens (10 ms) + base 10 ms; then 4 decode steps of 10 + 1 + kv.
    assert times[0] == 20 * MS
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(times) == 5 and all(11 * MS <= g <= 11.2 * MS for g in gaps)


def test_prefill_time_grows_with_uncached_tokens() -> None:
    short, long = Scheduler(profile()), Scheduler(profile())
    short.add(seq("s", 100, 1))
    long.add(seq("l", 1000, 1))
    assert long.step().duration_ns - short.step().duration_ns == pytest.approx(90 * MS, rel=1e-6)


def test_decode_step_grows_with_batch_and_kv() -> None:
    s = Scheduler(profile(prefill_us_per_token=0.0))
    for i in range(3):
        s.add(seq(f"q{i}", 1000, 50, base=i * 10_000))
    s.step()  # prefill all three
    d3 = s.step().duration_ns
    s2 = Scheduler(profile(prefill_us_per_token=0.0))
    s2.add(seq("one", 1000, 50))
    s2.step()
    d1 = s2.step().duration_ns
    # two more sequences: +2 ms per-seq work, +2 x ~1002 KV tokens x 1 ms/1k
    assert d3 - d1 == pytest.approx(2 * MS + 2 * 1002 * 1000, rel=1e-3)


def test_continuous_batching_joins_at_step_boundary_and_caps_running() -> None:
    s = Scheduler(profile(max_num_seqs=2))
    a, b, c = seq("a", 10, 3), seq("b", 10, 3, 100), seq("c", 10, 3, 200)
    for q in (a, b, c):
        s.add(q)
    plan = s.step()
    assert {q.rid for q, _ in plan.emissions} == {"a", "b"}
    assert [q.rid for q in s.waiting] == ["c"] and len(s.running) == 2
    run_until_done(s, [a, b, c])
    assert c.n_out == 3 and s.idle()


def test_chunked_prefill_spreads_a_long_prompt_over_steps() -> None:
    s = Scheduler(profile(max_num_batched_tokens=512, max_model_len=10_000, num_blocks=2000))
    a = seq("a", 1500, 2)
    s.add(a)
    steps_before_first = 0
    while not s.step().emissions:
        steps_before_first += 1
    assert steps_before_first == 2  # 512 + 512 + 476


def test_without_chunked_prefill_one_step_takes_the_whole_prompt() -> None:
    s = Scheduler(
        profile(max_num_batched_tokens=512, chunked_prefill=False, max_model_len=10_000, num_blocks=2000)
    )
    s.add(seq("a", 1500, 2))
    assert s.step().emissions


def test_preemption_when_kv_pool_runs_out_and_everyone_still_finishes() -> None:
    # 4 sequences of 32 prompt tokens growing to 32+60: 6 blocks each at the end, pool of 16.
    s = Scheduler(profile(num_blocks=16, prefix_caching=False))
    seqs = [seq(f"q{i}", 32, 60, base=i * 1000) for i in range(4)]
    for q in seqs:
        s.add(q)
    run_until_done(s, seqs)
    assert s.counters.preemptions > 0
    assert all(q.n_out == 60 for q in seqs)
    assert s.pool.available() == 16


def test_prefix_cache_hits_for_a_repeated_prompt() -> None:
    s = Scheduler(profile())
    a, b = seq("a", 100, 1), seq("b", 100, 1)
    s.add(a)
    run_until_done(s, [a])
    s.add(b)
    run_until_done(s, [b])
    assert a.cached_tokens == 0 and b.cached_tokens == 96  # 6 full blocks of 16
    assert s.pool.hits == 96 and s.pool.queries == 200


def test_exact_block_multiple_still_computes_one_token() -> None:
    s = Scheduler(profile())
    a, b = seq("a", 64, 1), seq("b", 64, 1)
    for q in (a, b):
        s.add(q)
        run_until_done(s, [q])
    assert b.cached_tokens == 48  # the last block is recomputed so a token can be produced


def test_block_hash_depends_on_all_earlier_tokens() -> None:
    tokens = list(range(64))
    changed_first = [999] + tokens[1:]
    h, h2 = block_hashes(tokens, 16), block_hashes(changed_first, 16)
    assert len(h) == 4 and all(x != y for x, y in zip(h, h2, strict=True))  # chain: all differ
    changed_last = tokens[:63] + [999]
    assert block_hashes(changed_last, 16)[:3] == h[:3]


def test_shared_system_prompt_hits_only_its_full_blocks() -> None:
    s = Scheduler(profile())
    system = list(range(40))  # 2 full blocks + 8 tokens
    a, b = Sequence("a", system + [500] * 30, 1), Sequence("b", system + [600] * 30, 1)
    for q in (a, b):
        s.add(q)
        run_until_done(s, [q])
    assert b.cached_tokens == 32


def test_cached_output_blocks_serve_the_next_turn() -> None:
    s = Scheduler(profile())
    a = seq("a", 40, 40)
    a.out_ids = [7000 + i for i in range(40)]
    s.add(a)
    run_until_done(s, [a])
    turn2 = Sequence("b", a.prompt + a.out_ids + [1, 2, 3], 1)
    s.add(turn2)
    run_until_done(s, [turn2])
    assert turn2.cached_tokens == 80  # 5 full blocks of prompt + answer


def test_prefix_cache_off_never_hits() -> None:
    s = Scheduler(profile(prefix_caching=False))
    a, b = seq("a", 100, 1), seq("b", 100, 1)
    for q in (a, b):
        s.add(q)
        run_until_done(s, [q])
    assert b.cached_tokens == 0 and s.pool.hits == 0


def test_cached_blocks_are_evicted_lru_when_space_is_needed() -> None:
    pool = BlockPool(4, 16)
    pool.allocate(2)
    pool.register([1, 2])
    pool.release([1, 2], 0)
    assert pool.available() == 4 and pool.match_prefix([1, 2], 2) == 2
    assert pool.allocate(3)  # two free blocks + one eviction: the tail block (2) goes first
    assert 2 not in pool.refs and 1 in pool.refs
    assert not pool.allocate(2)


def test_abort_frees_blocks() -> None:
    s = Scheduler(profile(prefix_caching=False))
    a = seq("a", 100, 50)
    s.add(a)
    s.step()
    assert s.pool.used() > 0
    s.abort(a)
    assert s.pool.used() == 0 and s.idle()


def test_fits_refuses_over_long_requests() -> None:
    s = Scheduler(profile(max_model_len=100))
    assert s.fits(90, 10) is None
    assert s.fits(90, 11) == "context"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"block_size": 0}, "--block-size must be >= 1"),
        ({"decode_base_ms": -1.0}, "--decode-base-ms must be >= 0"),
        ({"prefill_us_per_token": float("nan")}, "prefill-us-per-token"),
        ({"num_blocks": 0}, "--num-blocks"),
    ],
)
def test_impossible_profiles_are_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Profile().replace(**change)


def test_speculative_tokens_coalesce_into_one_event() -> None:
    s = Scheduler(profile(spec_tokens=4), seed=1)
    a = seq("a", 10, 200)
    s.add(a)
    sizes = []
    while not a.done:
        sizes += [n for q, n in s.step().emissions]
    assert sum(sizes) == 200 and max(sizes) > 1 and max(sizes) <= 4


def test_lateness_histogram_quantiles() -> None:
    from loadkit.sim.runner import LatenessStats

    h = LatenessStats()
    assert h.summary()["p50_ms"] is None
    for late_us in [5] * 90 + [500] * 9 + [3000]:
        h.add(late_us * 1000)
    s = h.summary()
    assert s["p50_ms"] == 0.01 and s["p99_ms"] == 0.51 and s["max_ms"] == 3.0 and s["within_1ms"] == 0.99


def test_a_sequence_that_reuses_no_prefix_runs_whatever_its_length() -> None:
    """No hashes (llama.cpp's cache_prompt=false, an embeddings batch) with prefix caching on: a
    prompt over one block is prefilled in full, once (the prefix lookup once indexed past its
    empty block list and stopped the step loop), and a second copy reuses nothing."""
    s = Scheduler(profile())
    first, again = seq("a", 100, 1), seq("b", 100, 1)
    for q in (first, again):
        q.hashes = []
        s.add(q)
    run_until_done(s, [first, again])
    assert first.cached_tokens == again.cached_tokens == 0
    assert s.counters.prompt_tokens == 200
