"""The step-level engine model: continuous batching over a paged KV cache, no clock inside.

:meth:`Scheduler.step` plans one engine step: it admits waiting sequences (FCFS, capped by
``max_num_seqs``, the per-step token budget and free KV blocks), advances chunked prefills,
decodes one token (1..spec_tokens) for every running sequence whose prefill is done, preempts
the most recently admitted sequence when the KV pool cannot grow, and returns how long the step
takes and which sequences emit how many tokens at its end. The caller owns time: the asyncio
runner sleeps for the duration, tests just add it to a fake clock.

Step time (ms) = decode_base_ms
               + decode_per_seq_ms × decoding sequences
               + kv_read_ms_per_1k_tokens × (KV tokens read by decoding sequences) / 1000
               + prefill_us_per_token × (uncached prompt tokens computed this step) / 1000
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from loadkit.sim.config import Profile
from loadkit.sim.kvcache import BlockPool, block_hashes


class Sequence:
    """One request inside the engine."""

    __slots__ = (
        "rid", "prompt", "tokens", "n_prompt", "target_out", "n_out", "prefill_left",
        "held", "private", "hashes", "cached_tokens", "admitted", "done", "aborted",
        "out_ids", "sink", "n_preempted", "priority", "arrival", "t_admit_ns",
    )  # fmt: skip

    def __init__(self, rid: str, prompt: list[int], target_out: int, sink: Any = None) -> None:
        self.rid = rid
        self.prompt = prompt
        self.tokens = prompt  # prompt, plus the output so far after a preemption
        self.n_prompt = len(prompt)
        self.target_out = target_out
        self.n_out = 0
        self.prefill_left = 0
        self.held: list[int] = []  # cached block hashes this sequence holds a reference on
        self.private = 0  # blocks held outside the prefix cache
        self.hashes: list[int] | None = None  # full-block hashes of self.tokens
        self.cached_tokens: int | None = None  # prompt tokens served from cache, first admission
        self.admitted = False
        self.done = False
        self.aborted = False
        self.n_preempted = 0
        # Ids of emitted tokens, set by the caller when it wants output blocks cached.
        self.out_ids: list[int] | None = None
        self.sink = sink
        self.priority = 0  # lower first, with scheduling_policy "priority"
        self.arrival = 0  # set by Scheduler.add: the FCFS tie-break
        # Start of the step that first admitted it (the runner's clock; 0 until then): the end
        # of its queueing and the start of its prefill in the server timings it reports.
        self.t_admit_ns = 0


@dataclass(slots=True)
class StepPlan:
    """One step: its duration and, at its end, the sequences that emit (batch order) and how
    many tokens each. Two parallel lists rather than a tuple per emission: at 2,000 running
    sequences those tuples were most of what the garbage collector had to walk."""

    duration_ns: int
    seqs: list[Sequence] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    prefill_tokens: int = 0
    decode_seqs: int = 0
    preempted: int = 0
    admitted: list[Sequence] = field(default_factory=list)  # admitted this step (once per request)

    @property
    def emissions(self) -> list[tuple[Sequence, int]]:
        """(sequence, tokens) pairs, for readers off the hot path."""
        return list(zip(self.seqs, self.counts, strict=True))


@dataclass(slots=True)
class EngineCounters:
    """Totals for /metrics."""

    steps: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    finished: int = 0
    aborted: int = 0
    busy_ns: int = 0


class Scheduler:
    """Continuous batching: waiting queue, running batch, block pool."""

    def __init__(self, profile: Profile, seed: int = 0) -> None:
        self.p = profile
        self.pool = BlockPool(profile.pool_blocks(), profile.block_size, profile.prefix_caching)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = EngineCounters()
        self._rng = random.Random(seed)
        self._arrivals = 0
        self._by_priority = profile.scheduling_policy == "priority"

    # ---- requests in and out -------------------------------------------------------------

    def fits(self, n_prompt: int, max_out: int) -> str | None:
        """Why a request can never run (None if it can): the engine's 400 case."""
        if n_prompt + max_out > self.p.max_model_len:
            return "context"
        if -(-(n_prompt + 1) // self.p.block_size) > self.pool.num_blocks:
            return "kv"
        return None

    def add(self, seq: Sequence) -> None:
        self._arrivals += 1
        seq.arrival = self._arrivals
        if self._by_priority:
            self._enqueue(seq)
        else:
            self.waiting.append(seq)

    def _enqueue(self, seq: Sequence) -> None:
        """Priority policy: the waiting queue stays ordered by (priority, arrival)."""
        key = (seq.priority, seq.arrival)
        i = len(self.waiting)
        while i > 0 and (self.waiting[i - 1].priority, self.waiting[i - 1].arrival) > key:
            i -= 1
        self.waiting.insert(i, seq)

    def abort(self, seq: Sequence) -> None:
        """The client went away: drop the sequence wherever it is."""
        if seq.done or seq.aborted:
            return
        seq.aborted = True
        self.counters.aborted += 1
        if seq.admitted:
            self.running.remove(seq)
            self._free(seq)
        else:
            self.waiting.remove(seq)

    def idle(self) -> bool:
        return not self.running and not self.waiting

    # ---- one step ------------------------------------------------------------------------

    def step(self) -> StepPlan:
        plan = StepPlan(0)
        budget = self.p.max_num_batched_tokens
        decoding, kv = self._reserve_decode(plan)
        budget -= len(decoding)
        budget = self._continue_prefills(plan, budget)
        self._admit(plan, budget)
        self._decode(plan, decoding)
        plan.duration_ns = self._duration_ns(plan, len(decoding), kv)
        self.counters.steps += 1
        self.counters.busy_ns += plan.duration_ns
        return plan

    def _reserve_decode(self, plan: StepPlan) -> tuple[list[Sequence], int]:
        """Grow the KV of decoding sequences by one token, preempting from the tail.

        Returns the decoding sequences and the KV tokens they read. Runs once per sequence
        per step, hence the inlined arithmetic.
        """
        bs = self.p.block_size
        decoding: list[Sequence] = []
        kv = i = 0
        running = self.running
        while i < len(running):
            seq = running[i]
            if seq.prefill_left == 0:
                ctx = seq.n_prompt + seq.n_out
                if ctx >= (len(seq.held) + seq.private) * bs and not self._grow(seq, plan):
                    continue  # seq itself was preempted; the list shifted
                decoding.append(seq)
                kv += ctx
            i += 1
        return decoding, kv

    def _grow(self, seq: Sequence, plan: StepPlan) -> bool:
        while not self.pool.allocate(1):
            victim = (
                max(self.running, key=lambda q: (q.priority, q.arrival))
                if self._by_priority
                else self.running[-1]
            )
            self._preempt(victim, plan)
            if victim is seq:
                return False
        seq.private += 1
        return True

    def _preempt(self, seq: Sequence, plan: StepPlan) -> None:
        """Recompute-style preemption: free everything, requeue at the front."""
        self.running.remove(seq)
        self._free(seq)
        seq.admitted = False
        seq.n_preempted += 1
        out = seq.out_ids if seq.out_ids is not None else [0] * seq.n_out
        seq.tokens = seq.prompt + out[: seq.n_out]
        seq.hashes = None
        if self._by_priority:
            self._enqueue(seq)
        else:
            self.waiting.appendleft(seq)
        plan.preempted += 1
        self.counters.preemptions += 1

    def _continue_prefills(self, plan: StepPlan, budget: int) -> int:
        for seq in self.running:
            if seq.prefill_left and budget > 0:
                budget -= self._prefill_chunk(seq, plan, budget)
        return budget

    def _prefill_chunk(self, seq: Sequence, plan: StepPlan, budget: int) -> int:
        take = min(seq.prefill_left, budget) if self.p.chunked_prefill else seq.prefill_left
        seq.prefill_left -= take
        plan.prefill_tokens += take
        if seq.prefill_left == 0:
            self._emit(seq, 1, plan)  # the step that finishes prefill yields the first token
        return take

    def _admit(self, plan: StepPlan, budget: int) -> None:
        while self.waiting and len(self.running) < self.p.max_num_seqs and budget > 0:
            seq = self.waiting[0]
            uncached = self._try_allocate(seq, plan, budget)
            if uncached is None:
                break  # FCFS: the head blocks the queue, as in vLLM
            self.waiting.popleft()
            self.running.append(seq)
            seq.admitted = True
            seq.prefill_left = uncached
            plan.admitted.append(seq)
            budget -= self._prefill_chunk(seq, plan, budget)

    def _try_allocate(self, seq: Sequence, plan: StepPlan, budget: int) -> int | None:
        """Take cached and new blocks for a sequence's prompt; its uncached token count."""
        bs, pool = self.p.block_size, self.pool
        if seq.hashes is None:
            seq.hashes = block_hashes(seq.tokens, bs) if pool.caching else []
        n = len(seq.tokens)
        hit = pool.match_prefix(seq.hashes, (n - 1) // bs)  # always compute >= 1 token
        uncached = n - hit * bs
        if not self.p.chunked_prefill and uncached > budget and (plan.prefill_tokens or plan.seqs):
            return None
        need = -(-(n + 1) // bs) - hit
        in_lru = sum(1 for h in seq.hashes[:hit] if pool.refs[h] == 0)
        if pool.available() - in_lru < need:
            return None
        pool.acquire_cached(seq.hashes[:hit])
        pool.allocate(need)
        fresh = pool.register(seq.hashes[hit:])
        seq.held = seq.hashes[:hit] + fresh
        seq.private = need - len(fresh)
        self._count_prompt(seq, hit * bs)
        return uncached

    def _count_prompt(self, seq: Sequence, cached: int) -> None:
        if seq.cached_tokens is not None:
            return  # recomputing after preemption is not a new prompt
        seq.cached_tokens = cached
        self.pool.record_lookup(seq.n_prompt, cached)
        self.counters.prompt_tokens += seq.n_prompt
        self.counters.cached_prompt_tokens += cached

    def _decode(self, plan: StepPlan, decoding: list[Sequence]) -> None:
        k = self.p.spec_tokens
        plan.decode_seqs = len(decoding)
        if k > 1:
            rand = self._rng.random
            for seq in decoding:
                self._emit(seq, 1 + int(rand() * k), plan)
            return
        seqs, counts, n = plan.seqs, plan.counts, 0
        for seq in decoding:  # the common case, inlined: one token each
            if seq.n_out + 1 >= seq.target_out:
                self._emit(seq, 1, plan)
                continue
            seq.n_out += 1
            seqs.append(seq)
            counts.append(1)
            n += 1
        self.counters.generation_tokens += n

    def _emit(self, seq: Sequence, n: int, plan: StepPlan) -> None:
        n = min(n, seq.target_out - seq.n_out)
        seq.n_out += n
        self.counters.generation_tokens += n
        plan.seqs.append(seq)
        plan.counts.append(n)
        if seq.n_out >= seq.target_out:
            self._finish(seq)

    def _finish(self, seq: Sequence) -> None:
        seq.done = True
        self.running.remove(seq)
        self.counters.finished += 1
        if self.pool.caching and seq.out_ids is not None and seq.held:
            tokens = seq.prompt + seq.out_ids[: seq.n_out]
            new = block_hashes(tokens, self.p.block_size, len(seq.held), seq.held[-1])
            new = new[: seq.private]
            seq.private -= len(new)
            seq.held += self.pool.register(new)
        self._free(seq)

    def _free(self, seq: Sequence) -> None:
        self.pool.release(seq.held, seq.private)
        seq.held, seq.private = [], 0

    def _duration_ns(self, plan: StepPlan, n_decoding: int, kv: int) -> int:
        p = self.p
        if not plan.seqs and not plan.prefill_tokens and not n_decoding:
            return 0
        ms = (
            p.decode_base_ms
            + p.decode_per_seq_ms * n_decoding
            + p.kv_read_ms_per_1k_tokens * kv / 1000.0
            + p.prefill_us_per_token * plan.prefill_tokens / 1000.0
        )
        return int(ms * 1_000_000)
