"""RequestSource: a scenario turned into a deterministic stream of requests and sessions.

Item ``i`` of the global stream is a pure function of (seed, i): it is built from a Generator
seeded by ``[seed, stream, i]``. Worker ``w`` of ``W`` takes items ``i ≡ w (mod W)``, so
workers get disjoint shares whose union is exactly the single-worker stream, on any machine.

A run's ``salt`` (issue 32) changes only the words: texts come from ``salted_seed(seed, salt)``
by the same keys, so lengths and arrivals stay the scenario's, texts sharing a key within the
run (a system prompt, a Mooncake block) still share it, and a rerun with another salt meets
none of the last run's prefixes in the server's cache. Salt 0: the scenario's seed alone.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from loadkit.types import GenerationRequest
from loadkit.workload.errors import ScenarioError
from loadkit.workload.images import ImageMaker, ImageSpec, attach
from loadkit.workload.mooncake import BlockPrompts, group_sessions
from loadkit.workload.realised import Realised
from loadkit.workload.reasoning import apply_split
from loadkit.workload.sessions import Session, SessionContext, TraceSession
from loadkit.workload.sourceparts import (
    SystemPool,
    load_trace_for,
    loop_span,
    part_lengths,
    with_tools,
)
from loadkit.workload.tenantplan import STAGE as TENANT_STAGE
from loadkit.workload.tenantplan import tenant_schedule
from loadkit.workload.tenantsessions import tenant_of_session
from loadkit.workload.text import ApproxBuilder, TextBuilder, hf_builder, salted_seed
from loadkit.workload.traces import Trace, block_sharing, leading_cached_blocks
from loadkit.workload.warmcache import (
    WARMUP_LABEL,
    WARMUP_STAGE,
    expected_shares,
    history_blocks,
    max_blocks_for,
    warm_prefixes,
)

if TYPE_CHECKING:
    from loadkit.workload.scenario import Scenario
    from loadkit.workload.spec import SessionSpec
    from loadkit.workload.tenants import TenantSpec

Item = GenerationRequest | Session | TraceSession
_PARTS, _TRACE, _SESSIONS = 0x9A27, 0x7ACE, 0x5E55


def make_builder(scenario: Scenario, server_url: str | None) -> TextBuilder:
    spec = scenario.prompt
    if spec.tokenizer == "hf":
        assert spec.tokenizer_path is not None
        return hf_builder(spec.tokenizer_path)
    if spec.tokenizer == "server":
        from loadkit.workload.servertok import server_builder

        url = spec.tokenize_url or (server_url and server_url.rstrip("/") + "/tokenize")
        if not url:
            raise ScenarioError(
                f"{scenario.path}: prompt.tokenize_url: expected a URL (or a target) for tokenizer 'server'"
            )
        model = scenario.targets[0]["model"] if scenario.targets else None
        return server_builder(url, spec.tokenize_format, model)
    return ApproxBuilder()


class RequestSource:
    """One worker's share of a scenario's items; see the module docstring."""

    def __init__(
        self,
        scenario: Scenario,
        worker_index: int = 0,
        worker_count: int = 1,
        *,
        server_url: str | None = None,
        salt: int = 0,
    ) -> None:
        if worker_count < 1 or not 0 <= worker_index < worker_count:
            raise ValueError(f"worker_index {worker_index} not in [0, {worker_count})")
        self.scenario = scenario
        self.worker_index, self.worker_count = worker_index, worker_count
        self.seed = scenario.seed  # lengths, choices, arrivals: the scenario's alone
        self.salt = salt
        self.text_seed = salted_seed(scenario.seed, salt)  # every prompt text: the run's own words
        self.builder = make_builder(scenario, server_url)
        self.stats = Realised(self.builder)
        self._arrivals: list[float] | None = None
        self._stages: list[str] | None = None  # per arrival, when not all "trace" (cache warm-up)
        self._history: set[int] = set()  # blocks before the window, with trace.warm_cache
        images = scenario.images
        self.images = ImageMaker(images, scenario.seed) if images is not None else None
        self._items: Iterator[Item] = self._build_stream()

    def next_item(self) -> Item | None:
        """The next request or session of this worker's share; None when the workload is exhausted."""
        return next(self._items, None)

    def trace_arrival_times_s(self) -> list[float] | None:
        """Arrival offsets (s, scaled by speed, from the window's start) of this worker's items, in
        next_item order; None unless the workload is a timestamped trace."""
        return None if self._arrivals is None else list(self._arrivals)

    def load_notes(self) -> list[str]:
        """The trace loader's warnings (rows out of order, bad rows skipped), for the run's report."""
        load = self.stats.trace_load
        return list(load["notes"]) if load else []

    def trace_arrival_stages(self) -> list[str] | None:
        """The stage of each of trace_arrival_times_s(): "warmup" for cache warm-up requests; None
        when every arrival is the trace's own."""
        return None if self._stages is None else list(self._stages)

    def realised(self) -> dict[str, Any]:
        """Realised input/output lengths so far (and prefix sharing for Mooncake), JSON-ready."""
        return self.stats.summary()

    def _my_indices(self, total: int | None) -> Iterator[int]:
        i = self.worker_index
        while total is None or i < total:
            yield i
            i += self.worker_count

    def _build_stream(self) -> Iterator[Item]:
        sc = self.scenario
        if sc.sessions is not None:
            return self._session_stream()
        if sc.trace is not None:
            return self._trace_stream()
        return self._parts_stream()

    # -- synthetic request mix -------------------------------------------------------------
    def _parts_stream(self) -> Iterator[Item]:
        if self.scenario.tenants:
            return self._tenant_stream()
        return self._mix_stream()

    def _tenant_stream(self) -> Iterator[Item]:
        """Each request: a tenant (by weight, or as the tenants' own arrivals superpose:
        tenantplan.py), then one of its parts by weight (tenants.py)."""
        tenants = self.scenario.tenants
        if tenants[0].arrival is not None:  # eager: the schedule is asked for before the first item
            plan = tenant_schedule(self.scenario)[self.worker_index :: self.worker_count]
            self._arrivals = [t for t, _ in plan]
            self._stages = [TENANT_STAGE] * len(plan)
            return self._scheduled_tenants([k for _, k in plan])
        return self._weighted_tenants()

    def _scheduled_tenants(self, mine: list[int]) -> Iterator[Item]:
        tenants, i = self.scenario.tenants, self.worker_index
        for k in mine:
            yield self._tenant_request(
                i, tenants[k], np.random.default_rng([self.seed & 0xFFFFFFFF, _PARTS, i])
            )
            i += self.worker_count

    def _weighted_tenants(self) -> Iterator[Item]:
        tenants = self.scenario.tenants
        t_weights = np.asarray([t.weight for t in tenants]) / sum(t.weight for t in tenants)
        for i in self._my_indices(self.scenario.max_requests):
            rng = np.random.default_rng([self.seed & 0xFFFFFFFF, _PARTS, i])
            yield self._tenant_request(i, tenants[int(rng.choice(len(tenants), p=t_weights))], rng)

    def _tenant_request(self, i: int, tenant: TenantSpec, rng: np.random.Generator) -> GenerationRequest:
        parts = self.scenario.parts
        w = np.asarray([parts[j].weight for j in tenant.parts])
        part = parts[tenant.parts[int(rng.choice(len(w), p=w / w.sum()))]]
        n_in, n_out = part_lengths(part, rng)
        req = with_tools(self._single(i, (_PARTS, i), n_in, n_out, f"{tenant.name}/{part.label}"), part)
        req.priority = tenant.priority  # placed per target when sent (loadkit/core/priority.py)
        return self._with_images(req, i)

    def _mix_stream(self) -> Iterator[Item]:
        parts = self.scenario.parts
        weights = np.asarray([p.weight for p in parts]) / sum(p.weight for p in parts)
        # One part of fixed lengths draws nothing: skip the per-request Generator (~19 µs, a
        # few % of a worker's CPU at 1,500 requests/s); every other case draws from it.
        fixed: tuple[int, int] | None = None
        if len(parts) == 1 and parts[0].joint_in is None:
            inp, out = parts[0].input, parts[0].output
            if inp is not None and out is not None and inp.family == out.family == "fixed":
                fixed = part_lengths(parts[0], np.random.default_rng(0))  # the fixed family draws nothing
        for i in self._my_indices(self.scenario.max_requests):
            if fixed is not None:
                req = with_tools(self._single(i, (_PARTS, i), *fixed, parts[0].label), parts[0])
                yield self._with_images(req, i)
                continue
            rng = np.random.default_rng([self.seed & 0xFFFFFFFF, _PARTS, i])
            part = parts[int(rng.choice(len(parts), p=weights))] if len(parts) > 1 else parts[0]
            n_in, n_out = part_lengths(part, rng)
            yield self._with_images(
                with_tools(self._single(i, (_PARTS, i), n_in, n_out, part.label), part), i
            )

    def _with_images(self, req: GenerationRequest, i: int) -> GenerationRequest:
        """Request ``i``'s images ([images]), made here: before its send is timed."""
        return req if self.images is None else attach(req, self.images.draw(i))

    def _single(
        self,
        i: int,
        key: tuple[int, ...],
        n_in: int,
        n_out: int,
        label: str,
        cached: int | None = None,
        text: str | None = None,
    ) -> GenerationRequest:
        if text is None:
            text = self.builder.text(self.text_seed, key, n_in)
            n_in = self.builder.last_count if not self.builder.approximate else n_in
        spec = self.scenario.prompt
        req = GenerationRequest(
            max_tokens=n_out,
            exact_output=spec.exact_output,
            label=label,
            n_in_target=n_in,
            expected_cached_tokens=cached,
        )
        if spec.shape == "messages":
            req.messages = [{"role": "user", "content": text}]
        else:
            req.prompt = text
        self.stats.add(n_in, n_out, label)
        return req

    # -- trace replay ----------------------------------------------------------------------
    def _load_trace(self) -> Trace:
        spec = self.scenario.trace
        assert spec is not None
        trace = load_trace_for(self.scenario)
        self.stats.trace_load = {**trace.load, "notes": list(trace.notes)}
        if spec.warm_cache:
            self._history = history_blocks(trace, spec.start_s)
        return trace.window(spec.start_s, spec.end_s)

    def _trace_plan(
        self, trace: Trace, n_units: int, t_unit: np.ndarray | None
    ) -> Iterator[tuple[int, int, float | None]]:
        """Global (unit, loop, arrival_s) items, lazily: windowed, looped, scaled, bounded."""
        spec, sc = self.scenario.trace, self.scenario
        assert spec is not None
        span = loop_span(trace, spec.start_s, spec.end_s)
        limit = sc.max_requests if sc.max_requests is not None else (math.inf if spec.loop else n_units)
        i = 0
        while i < limit:
            unit, loop = i % n_units, i // n_units
            if loop and not spec.loop:
                return
            t = None if t_unit is None else (float(t_unit[unit]) + loop * span) / spec.speed
            if t is not None and sc.duration_s is not None and t >= sc.duration_s:
                return
            yield unit, loop, t
            i += 1

    def _my_plan(
        self, trace: Trace, n_units: int, t_unit: np.ndarray | None
    ) -> Iterator[tuple[int, int, float | None]]:
        """This worker's share of the plan; with timestamps, its arrival times are noted up front."""
        plan = itertools.islice(
            self._trace_plan(trace, n_units, t_unit), self.worker_index, None, self.worker_count
        )
        if t_unit is None:
            return plan
        mine = list(plan)  # finite: validation bounds a looping timed trace by duration or count
        self._arrivals = [t for _, _, t in mine if t is not None]
        return iter(mine)

    def _trace_stream(self) -> Iterator[Item]:
        spec = self.scenario.trace
        assert spec is not None
        trace = self._load_trace()
        if spec.as_sessions:
            return self._mooncake_sessions(trace)
        mine = self._my_plan(trace, len(trace), trace.t_s)
        if trace.hash_ids is not None and spec.warm_cache:
            return self._warmed_mooncake(trace, mine)
        if trace.hash_ids is not None:
            return self._mooncake_requests(trace, mine)
        return self._length_requests(trace, mine)

    def _clip_lengths(self, trace: Trace, row: int) -> tuple[int, int]:
        spec = self.scenario.trace
        assert spec is not None
        n_in, n_out = max(int(trace.n_in[row]), 1), max(int(trace.n_out[row]), 1)
        if spec.max_input_tokens is not None:
            n_in = min(n_in, spec.max_input_tokens)
        if spec.max_output_tokens is not None:
            n_out = min(n_out, spec.max_output_tokens)
        return n_in, n_out

    def _length_requests(self, trace: Trace, mine: Iterator[tuple[int, int, float | None]]) -> Iterator[Item]:
        spec = self.scenario.trace
        assert spec is not None
        ratio = trace.reason_ratio  # ServeGen's reasoning share per row (reasoning.py)
        images = trace.image_tokens  # ServeGen's multimodal rows: each image's tokens (servegenmm.py)
        if images is None and self.images is not None:
            raise ScenarioError(
                f"{self.scenario.path}: images: expected a multimodal ServeGen dataset (image_count, "
                f"image_tokens) beside {trace.path.name}; its windows give no images"
            )
        maker = self._trace_image_maker() if images is not None else None
        for row, loop, _ in mine:
            n_in, n_out = self._clip_lengths(trace, row)
            req = self._single(row, (_TRACE, row, loop), n_in, n_out, spec.label)
            if maker is not None and images is not None and images[row]:
                req = attach(req, maker.for_tokens(images[row]))  # made here, before the send is timed
            yield req if ratio is None else apply_split(req, float(ratio[row]), spec.reasoning_hint)

    def _trace_image_maker(self) -> ImageMaker:
        """The maker of a multimodal trace's images, sized by their tokens (images.py); encoded
        and sent as the scenario's [images] says, if it has one (PNG data URLs if not)."""
        if self.scenario.prompt.shape != "messages":
            raise ScenarioError(
                f"{self.scenario.path}: trace: its rows carry images (ServeGen multimodal), which "
                'travel as chat content parts: expected prompt.shape = "messages"'
            )
        return self.images if self.images is not None else ImageMaker(ImageSpec(), self.seed)

    def _mooncake_requests(
        self, trace: Trace, mine: Iterator[tuple[int, int, float | None]], blocks: BlockPrompts | None = None
    ) -> Iterator[Item]:
        spec = self.scenario.trace
        assert spec is not None and trace.hash_ids is not None
        blocks = blocks or BlockPrompts(self.builder, self.text_seed, spec.block_tokens)
        history = self._history or None  # with warm_cache the window meets the history's blocks
        leading = leading_cached_blocks(trace.hash_ids, history)
        self.stats.attach_sharing(blocks, block_sharing(trace.hash_ids, history))
        for row, loop, _ in mine:
            yield self._mooncake_request(trace, blocks, row, leading[row] if loop == 0 else None)

    def _warmed_mooncake(self, trace: Trace, mine: Iterator[tuple[int, int, float | None]]) -> Iterator[Item]:
        """Warm-up prefixes first (this worker's share, due at once), then the window, shifted by
        warm_cache_s; see warmcache.py."""
        spec = self.scenario.trace
        assert spec is not None and self._arrivals is not None
        prefixes = warm_prefixes(
            trace, self._history, max_blocks_for(spec.max_input_tokens, spec.block_tokens)
        )
        share = prefixes[self.worker_index :: self.worker_count]
        self._arrivals = [0.0] * len(share) + [t + spec.warm_cache_s for t in self._arrivals]
        self._stages = [WARMUP_STAGE] * len(share) + ["trace"] * (len(self._arrivals) - len(share))
        self.stats.warmup = {
            "prefixes": len(prefixes),
            "requests": len(share),
            "prompt_tokens": 0,
            "history_blocks": len(self._history),
            "delay_s": spec.warm_cache_s,
            **expected_shares(trace, self._history, spec.block_tokens, spec.max_input_tokens),
        }
        blocks = BlockPrompts(self.builder, self.text_seed, spec.block_tokens)
        return itertools.chain(
            (self._warm_request(blocks, ids) for ids in share), self._mooncake_requests(trace, mine, blocks)
        )

    def _warm_request(self, blocks: BlockPrompts, ids: list[int]) -> GenerationRequest:
        spec = self.scenario.trace
        assert spec is not None
        text = " ".join(
            blocks._block(h, spec.block_tokens) for h in ids
        )  # not counted as the window's sharing
        n_in = len(ids) * spec.block_tokens
        req = GenerationRequest(
            max_tokens=1, exact_output=False, label=WARMUP_LABEL, n_in_target=n_in, stage=WARMUP_STAGE
        )
        if self.scenario.prompt.shape == "messages":
            req.messages = [{"role": "user", "content": text}]
        else:
            req.prompt = text
        warm = self.stats.warmup
        assert warm is not None
        warm["prompt_tokens"] += n_in
        return req

    def _mooncake_request(
        self, trace: Trace, blocks: BlockPrompts, row: int, lead: int | None, label: str | None = None
    ) -> GenerationRequest:
        spec = self.scenario.trace
        assert spec is not None and trace.hash_ids is not None
        n_in, n_out = self._clip_lengths(trace, row)
        ids = trace.hash_ids[row]
        text, n_in = blocks.prompt(ids, n_in)
        self.stats.add_trace_blocks(ids[: max(1, math.ceil(n_in / spec.block_tokens))])
        cached = n_in if lead is None else min(n_in, lead * spec.block_tokens)
        return self._single(row, (), n_in, n_out, label or spec.label, cached=cached, text=text)

    def _mooncake_sessions(self, trace: Trace) -> Iterator[Item]:
        """Plan eagerly (arrival times must exist before the first item), build sessions lazily."""
        spec = self.scenario.trace
        assert spec is not None and trace.hash_ids is not None and trace.t_s is not None
        groups = group_sessions(trace.hash_ids)
        starts = np.asarray([trace.t_s[g[0]] for g in groups])
        mine = self._my_plan(trace, len(groups), starts)
        blocks = BlockPrompts(self.builder, self.text_seed, spec.block_tokens)
        leading = leading_cached_blocks(trace.hash_ids)
        self.stats.attach_sharing(blocks, block_sharing(trace.hash_ids))
        return (
            self._trace_session(trace, blocks, groups[unit], leading, unit, loop) for unit, loop, _ in mine
        )

    def _trace_session(
        self, trace: Trace, blocks: BlockPrompts, rows: list[int], leading: list[int], unit: int, loop: int
    ) -> TraceSession:
        spec = self.scenario.trace
        assert spec is not None and trace.t_s is not None
        gaps = [float(trace.t_s[b] - trace.t_s[a]) / spec.speed for a, b in zip(rows, rows[1:], strict=False)]
        sid = f"{self.scenario.name}-m{unit}" + (f"-l{loop}" if loop else "")

        def make(turn: int) -> GenerationRequest:
            row = rows[turn]
            req = self._mooncake_request(
                trace,
                blocks,
                row,
                leading[row] if loop == 0 else None,
                label="turn1" if turn == 0 else "turnN",
            )
            req.session_id, req.turn = sid, turn + 1
            return req

        return TraceSession(sid, make, gaps)

    # -- synthetic sessions ----------------------------------------------------------------
    def _session_stream(self) -> Iterator[Item]:
        spec = self.scenario.sessions
        assert spec is not None
        ctx = SessionContext(
            self.builder,
            self.seed,
            self.scenario.prompt.shape,
            self.scenario.prompt.exact_output,
            on_request=self._on_session_request,
            text_seed=self.text_seed,
        )
        if self.scenario.tenants:
            return self._tenant_sessions(spec, ctx)
        pool = SystemPool(self, spec.system) if spec.system is not None else None
        return (self._session(j, spec, ctx, pool) for j in self._my_indices(spec.count))

    def _session(
        self,
        j: int,
        spec: SessionSpec,
        ctx: SessionContext,
        pool: SystemPool | None,
        priority: int | None = None,
    ) -> Session:
        system = pool.pick(j) if pool is not None else None
        self.stats.sessions += 1
        return Session(f"{self.scenario.name}-s{j}", j, spec, ctx, system, priority)

    def _tenant_sessions(self, spec: SessionSpec, ctx: SessionContext) -> Iterator[Item]:
        """Session j: a tenant by weight (tenantsessions.py) or, with the tenants' own arrivals,
        the tenant whose arrival it is (one session per arrival: tenantplan.py); then a session of
        the tenant's own spec. A tenant that replaces system_prompts has a pool of its own; the
        others share the scenario's."""
        tenants = self.scenario.tenants
        specs = [t.sessions or spec for t in tenants]  # every tenant of a [sessions] workload has one
        shared = SystemPool(self, spec.system) if spec.system is not None else None
        pools = [self._tenant_pool(k, own, shared) for k, own in enumerate(specs)]
        pairs = self._session_tenants(spec.count)  # not a generator: the arrivals are noted now
        return (self._session(j, specs[k], ctx, pools[k], tenants[k].priority) for j, k in pairs)

    def _session_tenants(self, count: int | None) -> Iterator[tuple[int, int]]:
        """This worker's (session index, tenant index) pairs; eager with own arrivals (the
        schedule is asked for before the first item)."""
        tenants = self.scenario.tenants
        if tenants[0].arrival is None:
            weights = np.asarray([t.weight for t in tenants]) / sum(t.weight for t in tenants)
            return ((j, tenant_of_session(self.seed, j, weights)) for j in self._my_indices(count))
        plan = tenant_schedule(self.scenario)[:count]
        mine = list(enumerate(plan))[self.worker_index :: self.worker_count]
        self._arrivals = [t for _, (t, _) in mine]
        self._stages = [TENANT_STAGE] * len(mine)
        return iter([(j, k) for j, (_, k) in mine])

    def _tenant_pool(self, k: int, own: SessionSpec, shared: SystemPool | None) -> SystemPool | None:
        tenant_raw = self.scenario.raw["tenants"][k].get("sessions", {})
        if "system_prompts" not in tenant_raw:
            return shared
        return SystemPool(self, own.system, salt=k + 1) if own.system is not None else None

    def _on_session_request(self, n_in: int, max_tokens: int) -> None:
        self.stats.add(n_in, max_tokens, "session")
