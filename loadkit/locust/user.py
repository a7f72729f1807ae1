"""LLMUser: the Locust user class that streams generations through an engine adapter.

Its tasks are yours: `self.chat`, `self.complete` and `self.session` (loadkit.locust.api) send
through `send`; ScenarioUser (loadkit.locust.scenario_user) adds the task that sends a
scenario's traffic. Requests never go through Locust's HTTP client; the stream timer owns the
socket so event arrival is stamped at the read (docs/performance.md, "What the client does"). One Locust `request` event per
finished request keeps Locust's own tables and exit codes meaningful, without the per-token
cost.
"""

from __future__ import annotations

from typing import Any

import gevent
from locust import FastHttpUser, constant
from locust.contrib.fasthttp import FastHttpSession
from locust.exception import StopUser

from loadkit.client.httpstream import ConnectionPool
from loadkit.client.timer import run_request
from loadkit.core.priority import place_priority
from loadkit.locust import starts
from loadkit.locust.api import LLMCalls
from loadkit.locust.failures import FAILURE_TEXTS, RequestOutcomeError  # noqa: F401 (was defined here)
from loadkit.locust.runtime import Runtime
from loadkit.records import RequestRecord, e2e_ms
from loadkit.types import CANCELLED, OK, GenerationRequest


def get_runtime(environment: Any) -> Runtime:
    runtime = getattr(environment, "loadkit", None)
    if runtime is None:
        raise RuntimeError(
            "loadkit's listeners are not on this environment's events: define the user classes in the "
            "locustfile (from loadkit import LLMUser, ScenarioUser), or call "
            "loadkit.register_listeners(events) before the environment is created"
        )
    return runtime


class LLMUser(LLMCalls, FastHttpUser):
    """A user whose tasks you write (self.chat, self.complete, self.session); no task of its own.

    Class attribute `target`: the name of the target its users send to (default: the run's
    targets in turn); in a running user `self.target` is that Target, and `self.client`
    (Locust's HTTP client, for calls of your own) has that target's URL as its base."""

    abstract = True
    wait_time = constant(0)
    target: Any = None
    loadkit_user = True  # marks loadkit's user classes (e.g. their targets are checked at start)

    def on_start(self) -> None:
        self.runtime = get_runtime(self.environment)
        # A worker whose run config came after Locust's spawn message finishes its start
        # before its users may pick a target (locust/starts.py ask_for_config).
        self.runtime.ready.wait(timeout=starts.CONFIG_WAIT_S + 5)
        if self.runtime.halted:
            return  # its first task stops it (StopUser here would be logged as an error)
        self.target = self.runtime.target_for(type(self))
        self.client = self._client_for(self.target.spec.url)
        self.pool = ConnectionPool()
        self.session_header = self.runtime.config.user.session_header
        self.backoff = self.runtime.new_backoff()

    def _client_for(self, url: str) -> FastHttpSession:
        """``self.client`` on this user's target: Locust built it on the run's first target
        (``environment.host``), and a class naming another target talks to that one. Built as
        FastHttpUser builds it, from the same class attributes."""
        base_url = url.rstrip("/")
        client = getattr(self, "client", None)
        if isinstance(client, FastHttpSession) and client.base_url == base_url:
            return client
        return FastHttpSession(
            base_url=base_url, request_event=self.environment.events.request, user=self,
            network_timeout=self.network_timeout, connection_timeout=self.connection_timeout,
            max_redirects=self.max_redirects, max_retries=self.max_retries, insecure=self.insecure,
            concurrency=self.concurrency, client_pool=self.client_pool, ssl_context_factory=self.ssl_context_factory,
            headers=self.default_headers, proxy_host=self.proxy_host, proxy_port=self.proxy_port,
        )  # fmt: skip

    def on_stop(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.close()

    def send(self, request: GenerationRequest, budgeted: bool = False) -> RequestRecord:
        if self.runtime.halted:
            raise StopUser()  # the breaker (or a failed start) stopped the run; the stop is on its way
        wait, self._retry_wait = getattr(self, "_retry_wait", 0.0), 0.0
        if wait > 0:
            gevent.sleep(wait)  # Retry-After (with --honor-retry-after), or backoff after a fast failure
            if not budgeted and self.runtime.halted:
                raise StopUser()
        if not budgeted and not self.runtime.take_budget():
            self.runtime.workload_exhausted()
            raise StopUser()
        if request.stage is None:
            request.stage = self.runtime.schedules.stage_now()
        self.runtime.schedules.count_sent(request)
        headers = {}
        if self.session_header and request.session_id:
            headers[self.session_header] = request.session_id
        if request.priority is not None:  # a tenant's: a body field or a header, as the target says
            place_priority(request.priority, self.target.priority_as, request.extra_body, headers)
        return run_request(
            self.target.adapter,
            self.target.endpoint,
            request,
            engine=self.target.name,
            timeouts=self.runtime.timeouts,
            pool=self.pool,
            extra_headers=headers,
            sink=self._finished,
        )

    def _finished(self, record: RequestRecord) -> None:
        record.user_class = type(self).__name__
        self.runtime.record(record)
        self._retry_wait = self.runtime.retry_wait(record, getattr(self, "backoff", None))
        if record.outcome == CANCELLED:
            # Stopped by the test, not failed by the server: loadkit counts it; Locust's
            # table would show it either as a failure or as a short success, both wrong.
            return
        e2e = e2e_ms(record)
        # A kind other than chat gets its own row in Locust's table (its latency is not a chat's).
        kind = getattr(record, "kind", "chat")
        self.environment.events.request.fire(
            request_type="LLM",
            name=f"{record.engine} {record.label}"
            if kind == "chat"
            else f"{record.engine} {record.label} [{kind}]",
            response_time=e2e if e2e is not None else 0.0,
            response_length=record.n_out or 0,
            exception=None if record.outcome == OK else FAILURE_TEXTS.error_for(record),
            context={"request_id": record.request_id},
        )
