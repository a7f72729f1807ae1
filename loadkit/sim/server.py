"""One simulated engine on one port: routing, request intake, faults, truth records.

:class:`SimEngine` ties a Scheduler (the model), an EngineRunner (real time), an engine family
(wire protocol) and the HTTP connections together. :func:`serve` starts several on one loop.
"""

from __future__ import annotations

import asyncio
import math
import random
import ssl
import sys
import time
import traceback
import uuid
from array import array
from dataclasses import dataclass, field
from typing import Any

from loadkit.sim.config import Profile
from loadkit.sim.endpoints import routes as info_routes
from loadkit.sim.engine import Scheduler, Sequence
from loadkit.sim.families import GenRoute, context_error, match_route
from loadkit.sim.faults import HTTP_FAULTS, Fault, FaultPlan, fault_from_header
from loadkit.sim.http import HttpConnection, Request
from loadkit.sim.images import FETCHED, FetchError, fetch_all, image_urls
from loadkit.sim.protocols import require
from loadkit.sim.runner import EngineRunner, TruthLog
from loadkit.sim.stream import ActiveStream, Trickle
from loadkit.sim.textgen import OutputCorpus, tokenize
from loadkit.sim.wire.common import RequestSpec, parse_json_object
from loadkit.types import REASONING_HINT_HEADER


@dataclass(slots=True)
class ServerOptions:
    """Options shared by all engines of one simulator process."""

    host: str = "127.0.0.1"
    seed: int = 0
    faults: FaultPlan = field(default_factory=FaultPlan)
    truth_log: str | None = None
    stall_seconds: float = 60.0
    trickle_interval_ms: float = 5.0
    retry_after_s: int = 1
    spin_us: float = 1200.0
    sndbuf: int | None = None
    # Serve https: certificate chain and key (PEM); with a client CA, require client certificates.
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server context for --tls-cert/--tls-key (None: plain HTTP); OSError/SSLError
        when a file cannot be used."""
        if not self.tls_cert:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.tls_cert, self.tls_key)
        ctx.set_alpn_protocols(["http/1.1"])
        if self.tls_client_ca:
            ctx.load_verify_locations(self.tls_client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx


@dataclass(slots=True)
class Fetched:
    """A request's fetched image URLs (sim/images.py): their bytes, the fetch's time, the error."""

    data: dict[str, bytes]
    ns: int
    error: str | None = None


def _image_urls(req: Request) -> list[str]:
    """The request's http(s) image URLs; the body is parsed here only when its bytes say it may
    hold one (a data-URL request of megabytes is parsed once, by the family)."""
    body = req.body
    if b'"image_url"' not in body or (b'"http://' not in body and b'"https://' not in body):
        return []
    try:
        return image_urls(parse_json_object(body))
    except ValueError:
        return []  # the family's parse names what is wrong


@dataclass(slots=True)
class EngineSpec:
    """One port: its family, port number (0 = any free port) and profile."""

    family: str
    port: int
    profile: Profile


class SimEngine:
    def __init__(self, spec: EngineSpec, options: ServerOptions, truth: TruthLog | None, index: int) -> None:
        self.family = spec.family
        self.profile = spec.profile
        self.model = spec.profile.model
        self.options = options
        self.seed = options.seed * 1000 + index
        self.scheduler = Scheduler(spec.profile, self.seed)
        self.runner = EngineRunner(
            self.scheduler, options.spin_us, output_us_per_event=spec.profile.output_us_per_event
        )
        self.runner.on_request = self.take
        self.corpus = OutputCorpus(self.seed, max(1 << 16, spec.profile.max_model_len))
        self.truth = truth
        self.created = int(time.time())
        self.arrivals = 0
        self.requests_done = 0
        self._fetches: set[asyncio.Future[dict[str, bytes]]] = set()  # image URL fetches under way
        self.port = spec.port
        # The family's protocol (built-in or a plugin's), looked up once: its generation
        # routes are matched on every request.
        wire = require(spec.family)
        self.gen_routes = wire.routes
        self.routes = info_routes(self, wire.info(self) if wire.info is not None else {})
        self.server_header = wire.server_header

    # ---- connections ---------------------------------------------------------------------

    def protocol(self) -> HttpConnection:
        return HttpConnection(self.handle, self.server_header, self.options.sndbuf)

    def handle(self, req: Request, conn: HttpConnection) -> None:
        route = match_route(self.family, self.gen_routes, req.path)
        if route is not None:
            if req.method != "POST":
                conn.respond(405, b'{"error":"method not allowed"}')
                return
            self.runner.submit((req, conn, route, time.monotonic_ns()))
            return
        info = self.routes.get((req.method, req.path))
        if info is None:
            conn.respond(404, b'{"detail":"Not Found"}')
            return
        try:
            status, body, ctype = info(req.body)
        except ValueError as exc:
            status, body, ctype = 400, self.parse_error_body(str(exc)), "application/json"
        conn.respond(status, body, ctype)

    # ---- generation ----------------------------------------------------------------------

    def take(self, item: tuple[Request, HttpConnection, GenRoute, int]) -> None:
        """A queued generation request reaches the engine (called by the runner)."""
        req, conn, route, t_arrival = item
        try:
            self.generate(req, conn, route, t_arrival)
        except Exception:  # a simulator bug must not take the server down: log it, answer 500
            traceback.print_exc(file=sys.stderr)
            if conn.busy and not conn.closed:
                conn.keep_alive = False
                conn.respond(500, b'{"error":"internal simulator error"}')

    def generate(
        self,
        req: Request,
        conn: HttpConnection,
        route: GenRoute,
        t_arrival: int,
        fetched: Fetched | None = None,
    ) -> None:
        urls = _image_urls(req) if fetched is None else []
        if urls:  # fetched first, as vLLM does: the request reaches the engine after its images
            self._fetch_then_generate(req, conn, route, t_arrival, urls)
            return
        rng = random.Random(self.seed * 1_000_003 + self.arrivals)
        self.arrivals += 1
        rid = req.headers.get("x-request-id") or uuid.uuid4().hex
        truth = self._truth_record(rid, req.path, t_arrival)
        if fetched is not None:
            truth["image_fetches"], truth["image_fetch_ms"] = len(fetched.data), fetched.ns / 1e6
        if conn.closed:  # the client left while the request was queued
            truth["client_disconnected"] = True
            self._end_record(truth)
            return
        if fetched is not None and fetched.error is not None:  # vLLM: a 400 naming the URL
            truth["image_fetch_error"] = fetched.error
            self._refuse(conn, truth, 400, route.error(400, fetched.error))
            return
        token = FETCHED.set(fetched.data if fetched is not None else None)
        try:
            fault = self._pick_fault(req, rng)
            spec = route.parse(parse_json_object(req.body), self.profile.default_max_tokens, self.model)
            spec.priority = self._priority(req, spec)
            hint = reasoning_hint(req)
        except ValueError as exc:
            self._refuse(conn, truth, route.bad_status, route.error(route.bad_status, str(exc)))
            return
        finally:
            FETCHED.reset(token)
        if route.stream is not None:
            spec.stream = route.stream
        if fault is not None and fault.name in HTTP_FAULTS:
            self._http_fault(conn, truth, route, fault)
            return
        self._start(req, conn, route, spec, fault, truth, rng, hint)

    def _start(
        self,
        req: Request,
        conn: HttpConnection,
        route: GenRoute,
        spec: RequestSpec,
        fault: Fault | None,
        truth: dict[str, Any],
        rng: random.Random,
        hint: int | None = None,
    ) -> None:
        ids = spec.prompt_ids if spec.prompt_ids is not None else tokenize(spec.prompt)
        if spec.image_ids:  # after the text: charged for prefill, cached by content (sim/images.py)
            ids = ids + spec.image_ids
        truth["image_tokens"] = len(spec.image_ids or ())
        truth["image_count"] = spec.image_count
        if spec.item_tokens is not None:
            self._start_kind(conn, route, spec, fault, truth, rng, ids)
            return
        if self.scheduler.fits(len(ids), spec.max_tokens) is not None:
            status, body = context_error(
                self.family, self.gen_routes, len(ids), spec.max_tokens, self.profile.max_model_len
            )
            self._refuse(conn, truth, status, body)
            return
        seq = Sequence(truth["request_id"], ids, self._target_out(spec, rng))
        seq.priority = spec.priority
        start = self.corpus.start_for(rng)
        if self.profile.prefix_caching:
            seq.out_ids = self.corpus.ids_of(start, seq.target_out)
        if not spec.cache_prompt:
            seq.hashes = []  # llama.cpp's cache_prompt=false: no reuse
        fmt = route.fmt(spec, truth["request_id"], self.created, self.corpus, start)
        fmt.set_prompt(len(ids), 0)
        fmt.reasoning_tokens = truth["reasoning_tokens"] = self._reasoning_tokens(seq.target_out, rng, hint)
        if hint is not None:
            truth["reasoning_hint"] = hint
        fmt.reasoning_tags = self.profile.reasoning_format == "tags"
        # Mid-stream faults are recorded when they strike (a short answer may end first).
        truth["fault"] = "trickle" if fault is not None and fault.name == "trickle" else None
        sink = ActiveStream(self, conn, fmt, seq, truth, fault)
        seq.sink = sink
        if spec.stream:
            conn.start_stream(200, fmt.content_type, sink.headers())
            if fault is not None and fault.name == "trickle":
                sink.trickle = Trickle(conn, fault.arg or 1, self.options.trickle_interval_ms / 1000)
        self.scheduler.add(seq)
        self.runner.wake()

    def _fetch_then_generate(
        self, req: Request, conn: HttpConnection, route: GenRoute, t_arrival: int, urls: list[str]
    ) -> None:
        """Fetch the request's image URLs (sim/images.py fetch_all), then generate: the fetch's
        time is part of the wait before prefill, as in vLLM, and the truth log records it."""
        t0 = time.monotonic_ns()
        task = asyncio.ensure_future(fetch_all(urls))
        self._fetches.add(task)

        def done(t: asyncio.Future[dict[str, bytes]]) -> None:
            self._fetches.discard(task)
            try:
                fetched = Fetched(t.result(), time.monotonic_ns() - t0)
            except FetchError as exc:
                fetched = Fetched({}, time.monotonic_ns() - t0, str(exc))
            try:
                self.generate(req, conn, route, t_arrival, fetched)
            except Exception:  # as take(): a simulator bug answers 500, the server stays up
                traceback.print_exc(file=sys.stderr)
                if conn.busy and not conn.closed:
                    conn.keep_alive = False
                    conn.respond(500, b'{"error":"internal simulator error"}')

        task.add_done_callback(done)

    def _start_kind(
        self,
        conn: HttpConnection,
        route: GenRoute,
        spec: RequestSpec,
        fault: Fault | None,
        truth: dict[str, Any],
        rng: random.Random,
        ids: list[int],
    ) -> None:
        """An embeddings or rerank request (one body, no decode): one sequence whose prompt is
        every item's tokens, prefilled in the shared batch (chunked within the step budget,
        beside the chat streams) and answered at the step that finishes its prefill. No prefix
        reuse: pooling runs recompute their inputs. The context limit applies per item."""
        items = spec.item_tokens or []
        truth["kind"], truth["items"] = spec.kind, len(items)
        longest = max(items, default=0)
        limit = self.profile.max_model_len
        if longest > limit or self.scheduler.fits(len(ids), 0) == "kv":
            message = (
                f"an input of {longest} tokens is over the model's context length of {limit} tokens"
                if longest > limit
                else f"the request's {len(ids)} tokens do not fit the KV cache"
            )
            self._refuse(conn, truth, route.bad_status, route.error(route.bad_status, message))
            return
        spec.embedding_dim = self.profile.embedding_dim
        seq = Sequence(truth["request_id"], ids, 1)
        seq.priority = spec.priority
        seq.hashes = []
        fmt = route.fmt(spec, truth["request_id"], self.created, self.corpus, 0)
        fmt.set_prompt(len(ids), 0)
        truth["fault"] = None
        sink = ActiveStream(self, conn, fmt, seq, truth, fault)
        seq.sink = sink
        self.scheduler.add(seq)
        self.runner.wake()

    def _priority(self, req: Request, spec: RequestSpec) -> int:
        """The body's priority, or with --priority-header that header's (0 when absent)."""
        name = self.profile.priority_header
        if not name:
            return spec.priority
        value = req.headers.get(name.lower(), "0")
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"header {name}: expected an integer priority, got {value!r}") from None

    def _target_out(self, spec: RequestSpec, rng: random.Random) -> int:
        """max_tokens, or an earlier seeded EOS when the request allows one."""
        mean = self.profile.eos_mean_tokens
        if spec.exact or mean <= 0:
            return spec.max_tokens
        natural = 1 + int(-math.log(1.0 - rng.random()) * mean)
        return max(1, min(spec.max_tokens, max(spec.min_tokens, natural)))

    def _reasoning_tokens(self, target_out: int, rng: random.Random, hint: int | None = None) -> int:
        """Tokens this reply thinks for: the request's hint (REASONING_HINT_HEADER) or a draw from
        the profile's distribution; at least one answer (or tool-call) token is left. A profile
        that does not reason (mean 0) ignores the hint, as a model without reasoning would."""
        mean, dist = self.profile.reasoning_mean_tokens, self.profile.reasoning_dist
        if mean <= 0:
            return 0
        if hint is not None:
            n = hint
        elif dist == "fixed":
            n = round(mean)
        elif dist == "uniform":
            n = rng.randint(0, round(2 * mean))
        else:
            n = int(-math.log(1.0 - rng.random()) * mean)
        return max(0, min(n, target_out - 1))

    def _pick_fault(self, req: Request, rng: random.Random) -> Fault | None:
        header = req.headers.get("x-loadkit-fault")
        if header:
            return fault_from_header(header)
        return self.options.faults.choose(rng)

    def _http_fault(self, conn: HttpConnection, truth: dict[str, Any], route: GenRoute, fault: Fault) -> None:
        status = HTTP_FAULTS[fault.name]
        headers = {"x-request-id": truth["request_id"]}
        if status == 429:
            headers["Retry-After"] = str(fault.arg if fault.arg is not None else self.options.retry_after_s)
        truth["fault"] = fault.name
        message = {429: "Too many requests", 503: "Service unavailable", 500: "Internal server error"}[status]
        truth["status"] = status
        conn.respond(
            status, route.error(status, f"{message} (loadkit sim fault {fault.name})"), headers=headers
        )
        self._end_record(truth)

    def _refuse(self, conn: HttpConnection, truth: dict[str, Any], status: int, body: bytes) -> None:
        truth["status"] = status
        conn.respond(status, body, headers={"x-request-id": truth["request_id"]})
        self._end_record(truth)

    # ---- truth ---------------------------------------------------------------------------

    # Per-event stamps are arrays, not lists: the garbage collector walks every element of a
    # list on each full collection, and 2,000 streams' stamps made those take ~15 ms.
    def _truth_record(self, rid: str, path: str, t_arrival: int) -> dict[str, Any]:
        return {"request_id": rid, "engine": self.family, "path": path, "port": self.port,
                "t_arrival_ns": t_arrival, "t_token_ns": array("q"), "tokens_per_event": array("q"), "t_end_ns": None,
                "prompt_tokens": None, "cached_tokens": None, "completion_tokens": 0, "fault": None,
                "status": 200, "reasoning_tokens": 0, "t_first_reasoning_ns": None, "t_first_answer_ns": None,
                "t_first_tool_ns": None, "kind": "chat", "items": None}  # fmt: skip

    def _end_record(self, truth: dict[str, Any]) -> None:
        truth["t_end_ns"] = time.monotonic_ns()
        self.record_truth(truth)

    def record_truth(self, truth: dict[str, Any]) -> None:
        self.requests_done += 1
        if self.truth is not None:
            self.truth.write(truth)

    def shutdown(self) -> None:
        """Record and cut every request still in the engine (the truth log stays complete)."""
        for seq in [*self.scheduler.running, *self.scheduler.waiting]:
            sink = seq.sink
            if isinstance(sink, ActiveStream) and not sink.ended:
                sink.truth["server_shutdown"] = True
                sink.conn.on_lost = None
                sink._finish(time.monotonic_ns())
                sink.conn.abort()

    def parse_error_body(self, message: str) -> bytes:
        """The family's error body for a request an info endpoint could not parse."""
        return next(iter(self.gen_routes.values())).error(400, message)

    def stats(self) -> dict[str, Any]:
        c, r = self.scheduler.counters, self.runner
        return {
            "family": self.family, "profile": self.profile.name, "model": self.model,
            "running": len(self.scheduler.running), "waiting": len(self.scheduler.waiting),
            "kv_usage": self.scheduler.pool.usage(), "steps": c.steps, "preemptions": c.preemptions,
            "generation_tokens": c.generation_tokens, "tokens_written": r.tokens_written,
            "requests": self.arrivals, "requests_done": self.requests_done, "resyncs": r.resyncs,
            "event_lateness": r.lateness.summary(), "step_lateness": r.step_lateness.summary(),
            "event_lateness_buckets": r.lateness.sparse(), "step_lateness_buckets": r.step_lateness.sparse(),
            "lateness_bucket_us": 10,
        }  # fmt: skip


def reasoning_hint(req: Request) -> int | None:
    """The request's REASONING_HINT_HEADER (tokens to reason for), None when absent; a value
    that is not a whole number >= 0 is the client's error (ValueError: a 400)."""
    value = req.headers.get(REASONING_HINT_HEADER)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(
            f"header {REASONING_HINT_HEADER}: expected a whole number of tokens >= 0, got {value!r}"
        )
    return n


async def start_engine(
    engine: SimEngine, host: str, tls: ssl.SSLContext | None = None
) -> tuple[asyncio.AbstractServer, asyncio.Task[None]]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(engine.protocol, host, engine.port, backlog=4096, reuse_address=True,
                                      ssl=tls)  # fmt: skip
    engine.port = server.sockets[0].getsockname()[1]
    task = loop.create_task(engine.runner.run())
    return server, task
