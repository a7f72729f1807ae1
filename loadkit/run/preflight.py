"""Pre-flight: before the run, ask every target once whether it takes the run's requests.

Per target, on the node that starts the run (local or master; never on workers):
1. ``GET /v1/models`` (adapters of the OpenAI family, when ``--model`` is given): the models
   the server lists.
2. One short real request with the run's shape — the target's own adapter builds it, from a
   tiny prompt with the scenario's endpoint shape and exact-output setting, ``max_tokens`` 4 —
   sent through the stream timer (``loadkit.client.timer.run_request``), so it takes the run's code
   path. It is not part of the run's stats.
3. If the server refuses it with a 4xx (not 408/425/429, which say "later"), the body fields
   loadkit added on its own — the exact-output fields (``ignore_eos``, ``min_tokens`` ...,
   found as what the body loses with ``exact_output`` off) and OpenAI's ``stream_options`` —
   are the suspects: those the error text names are dropped, else all of them, and the request
   is sent again. Accepted: those fields are dropped for the whole run, said in one line.
   ``--strict-request`` stops the run at the first refusal instead, with the server's text.
   Fields the user asked for (``--extra-body``) are never dropped.

Cheap detection of a server that ignores the model field: when ``--model`` is not among the
listed models and the request is accepted anyway, the server ignored it — a warning says the
figures are for the model it serves. Refused, the run stops with the list of served models
(without ``--model`` the list is read only then, so an accepted start costs no extra request).
A target that does not accept connections stops the run (unless --skip-reachability-check,
when it is said to be unreachable, with the connect error, and the start goes on);
anything else (5xx, a timeout, a broken stream) is reported in one line and the run goes on.

The decision is kept in the start plan (``StartPlan.preflight``), which the master sends every
worker with its run configuration at test start; each node's ``Runtime.configure`` applies it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from loadkit.client.timer import Timeouts, run_request
from loadkit.core.adapter import EngineAdapter
from loadkit.errors import UserError
from loadkit.records import RequestRecord
from loadkit.run.requestshape import drop_fields
from loadkit.servers.targets import Target
from loadkit.types import CONNECT_ERROR, OK, GenerationRequest

if TYPE_CHECKING:
    from loadkit.run.runconfig import RunConfig, StartPlan


class Runtime(Protocol):
    """What pre-flight reads and sets of a process's run state (locust/runtime.py ``Runtime``
    is one): the start's configuration, the targets, and the start plan it writes its verdicts to."""

    config: RunConfig
    start_plan: StartPlan
    targets: list[Target]
    scenario: Any


log = logging.getLogger("loadkit")

MAX_TOKENS = 4
PROMPT = "Say hello."
MODELS_PATH = "/v1/models"
LATER = (408, 425, 429)  # "try again later", not "never like this"
# Fields loadkit adds beyond the request itself, most specific first.
OPTIONAL_PATHS = ("stream_options.continuous_usage_stats", "stream_options")


class PreflightError(UserError):
    """A target refused the run's requests at pre-flight; one line, with the server's text.
    (Not a runtime.ConfigError so that this module stays importable without Locust.)"""


@dataclass(slots=True)
class Verdict:
    """What pre-flight found for one target; crosses to workers as a plain dict."""

    drop: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    served_models: list[str] | None = None
    outcome: str | None = None
    requests: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {"drop": self.drop, "notes": self.notes, "served_models": self.served_models,
                "outcome": self.outcome, "requests": self.requests}  # fmt: skip


# -- entry points (listeners) --------------------------------------------------------------


def before_headless_start(runtime: Runtime) -> None:
    """Headless: pre-flight before Locust starts, so a refusal exits 2 with nothing sent."""
    run(runtime)


def at_test_start(runtime: Runtime) -> None:
    """Local or master, after configure: run pre-flight unless this configuration had it (the
    headless early check ran it for this very start; a new configuration has none)."""
    if runtime.start_plan.preflight is None:
        run(runtime)


def run(runtime: Runtime) -> None:
    """Check every target; keep the decision in the start plan and apply it here."""
    shape = runtime.config.request
    strict = runtime.config.checks.strict_request
    skip_unreachable = runtime.config.checks.skip_reachability_check
    timeouts = Timeouts(
        5.0, min(runtime.config.timeouts.first_token_s, 30.0), min(runtime.config.timeouts.total_s, 60.0)
    )
    request = probe_request(runtime.scenario)
    targets = {}
    for target in runtime.targets:
        verdict = check_target(target, request, set(shape.extra_body), strict, skip_unreachable, timeouts)
        for note in verdict.notes:
            log.warning("loadkit: %s", note)
        if verdict.drop:
            drop_fields(target.adapter, verdict.drop)
        targets[target.name] = verdict.to_wire()
    runtime.start_plan = runtime.start_plan.with_(preflight=targets)


def manifest_fields(runtime: Runtime) -> dict[str, Any]:
    return {
        "preflight": runtime.start_plan.preflight,
        "request_options": {
            **runtime.config.request.manifest(),
            "strict_request": runtime.config.checks.strict_request,
        },
    }


# -- one target ----------------------------------------------------------------------------


def probe_request(scenario: Any) -> GenerationRequest:
    """A tiny request with the run's shape: the scenario's endpoint form and exact output."""
    prompt = getattr(scenario, "prompt", None)
    request = GenerationRequest(max_tokens=MAX_TOKENS, exact_output=getattr(prompt, "exact_output", True),
                                label="preflight")  # fmt: skip
    if getattr(prompt, "shape", "messages") == "messages":
        request.messages = [{"role": "user", "content": PROMPT}]
    else:
        request.prompt = PROMPT
    return request


def check_target(target: Target, request: GenerationRequest, user_keys: set[str], strict: bool,
                 skip_unreachable: bool, timeouts: Timeouts) -> Verdict:  # fmt: skip
    model = target.adapter.options.model
    served, why_not = served_models(target) if model else (None, None)
    verdict = Verdict(served_models=served)
    unlisted = bool(model and verdict.served_models is not None and model not in verdict.served_models)
    first = send(target, request, [], timeouts, verdict)
    if first.outcome == CONNECT_ERROR:
        # The list was not read because nothing answers: say that, not "lists no models" (issue 32).
        return unreachable(target, first, verdict, skip_unreachable, model)
    if why_not is not None:
        verdict.notes.append(f"target {target.name!r}: --model {model!r} not checked: {why_not}")
    if not refused(first):
        return accepted(target, first, verdict, unlisted)
    suspects = suspect_paths(target.adapter, request, user_keys)
    if strict:
        named = named_paths(one_line(first.error), suspects)
        hint = f" (it names {', '.join(named)}, which loadkit adds)" if named else ""
        raise PreflightError(refusal(target, first, verdict, unlisted, "the server refused the request") + hint
                             + "; --strict-request: stopped")  # fmt: skip
    drop, last = find_drop(target, request, first, suspects, unlisted, timeouts, verdict)
    if drop is None:  # the last refusal says why: after a dropped field, it may be the model
        raise PreflightError(refusal(target, last, verdict, unlisted, "pre-flight request refused"))
    verdict.drop = drop
    verdict.notes.append(dropped_note(target, first, drop, request))
    return accepted(target, last, verdict, unlisted)


def find_drop(target: Target, request: GenerationRequest, first: RequestRecord, suspects: list[str],
              unlisted: bool, timeouts: Timeouts, verdict: Verdict) -> tuple[list[str] | None, RequestRecord]:  # fmt: skip
    """Send again without what each refusal names (servers that name one field at a time get
    one request per field); when a refusal names nothing new, without every suspect. An
    unlisted model refused with no field named is the model's fault: no retry then.
    Returns (the fields to drop, or None when nothing helped; the last request's record)."""
    drop: list[str] = []
    record = first
    while True:
        named = [p for p in named_paths(one_line(record.error), suspects) if p not in drop]
        if named:
            drop = drop + named
        elif suspects and set(drop) != set(suspects) and (drop or not unlisted):
            drop = list(suspects)
        else:
            return None, record
        record = send(target, request, drop, timeouts, verdict)
        if record.outcome != CONNECT_ERROR and not refused(record):
            return drop, record


def send(target: Target, request: GenerationRequest, drop: list[str], timeouts: Timeouts,
         verdict: Verdict) -> RequestRecord:  # fmt: skip
    verdict.requests += 1
    with dropping(target.adapter, drop):
        record = run_request(target.adapter, target.endpoint, request, engine=target.name, timeouts=timeouts)
    verdict.outcome = record.outcome
    return record


@contextmanager
def dropping(adapter: EngineAdapter, paths: list[str]) -> Iterator[None]:
    """The adapter without ``paths`` in its bodies, for one pre-flight request."""
    before = adapter.__dict__.get("build_request")
    if paths:
        drop_fields(adapter, paths)
    try:
        yield
    finally:
        if before is None:
            adapter.__dict__.pop("build_request", None)
        else:
            adapter.build_request = before  # type: ignore[method-assign]


def refused(record: RequestRecord) -> bool:
    status = record.http_status
    return record.outcome != OK and status is not None and 400 <= status < 500 and status not in LATER


def accepted(target: Target, record: RequestRecord, verdict: Verdict, unlisted: bool) -> Verdict:
    if unlisted:
        verdict.notes.append(
            f"target {target.name!r}: --model {target.adapter.options.model!r} is not among the models it lists "
            f"({', '.join(verdict.served_models or [])}), yet it accepted the request: the server ignores the "
            "model field, and the figures are for the model it serves"
        )
    if record.outcome != OK:
        verdict.notes.append(f"target {target.name!r}: pre-flight request ended {record.outcome}: "
                             f"{one_line(record.error)}; starting anyway")  # fmt: skip
    return verdict


def unreachable(
    target: Target, record: RequestRecord, verdict: Verdict, skip: bool, model: str | None
) -> Verdict:
    message = (f"target {target.name!r} at {target.spec.url} is unreachable: the pre-flight request failed: "
               f"{one_line(record.error)}")  # fmt: skip
    if not skip:
        raise PreflightError(message)
    unchecked = (
        f"; --model {model!r} not checked" if model and MODELS_PATH in target.adapter.info_paths else ""
    )
    verdict.notes.append(f"{message}{unchecked}; starting anyway (--skip-reachability-check)")
    return verdict


def refusal(target: Target, record: RequestRecord, verdict: Verdict, unlisted: bool, what: str) -> str:
    text = f"target {target.name!r}: {what}: {one_line(record.error)}"
    if verdict.served_models is None and not target.adapter.options.model:
        # Without --model the list was not read before; a refused request may be the model's
        # fault (the adapter's placeholder name), so the user needs the names to pick one.
        verdict.served_models = served_models(target)[0]
    served = ", ".join(verdict.served_models or [])
    if unlisted:
        text += f"; --model {target.adapter.options.model!r} is not among the models it serves: {served}"
    elif served and not target.adapter.options.model:
        text += f"; it serves: {served} (give --model)"
    return text


def dropped_note(target: Target, first: RequestRecord, drop: list[str], request: GenerationRequest) -> str:
    exact = set(suspect_paths(target.adapter, request, set(), optional=False))
    lengths = "; output lengths are not exact without them" if exact & set(drop) else ""
    return (f"target {target.name!r}: the server refused fields loadkit adds ({one_line(first.error)[:200]}); "
            f"sending without {', '.join(drop)} for this run{lengths} (--strict-request stops instead)")  # fmt: skip


# -- what the server lists, what loadkit added ---------------------------------------------


def served_models(target: Target) -> tuple[list[str] | None, str | None]:
    """Model ids from ``GET /v1/models``, and why there are none: (None, None) when the
    adapter has no such route; (None, reason) when the server could not be asked or did not
    answer with a list."""
    from loadkit.servers.http import get
    from loadkit.servers.info import auth_headers

    if MODELS_PATH not in target.adapter.info_paths:
        return None, None
    try:
        resp = get(target.spec.url, MODELS_PATH, 2.0, auth_headers(target.adapter))
    except (OSError, ValueError) as exc:
        return None, f"GET {MODELS_PATH} failed: {one_line(str(exc))}"
    body = resp.json() if resp.status == 200 else None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None, f"{MODELS_PATH} lists no models (HTTP {resp.status})"
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id") is not None], None


def suspect_paths(adapter: EngineAdapter, request: GenerationRequest, user_keys: set[str],
                  optional: bool = True) -> list[str]:  # fmt: skip
    """Dotted body paths loadkit added: what exact output adds, then OpenAI's stream_options."""
    full = body_of(adapter, request)
    paths = added_paths(full, body_of(adapter, replace(request, exact_output=False)))
    if optional:
        paths += [p for p in OPTIONAL_PATHS if has_path(full, p) and p not in paths]
    return [p for p in paths if p.split(".")[0] not in user_keys]


def body_of(adapter: EngineAdapter, request: GenerationRequest) -> dict[str, Any]:
    try:
        body = orjson.loads(adapter.build_request(request).body or b"")
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def added_paths(full: dict[str, Any], plain: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in full.items():
        if key not in plain:
            out.append(prefix + key)
        elif isinstance(value, dict) and isinstance(plain[key], dict):
            out += added_paths(value, plain[key], f"{prefix}{key}.")
        elif value != plain[key]:
            out.append(prefix + key)
    return out


def has_path(body: dict[str, Any], path: str) -> bool:
    node: Any = body
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def named_paths(text: str, paths: list[str]) -> list[str]:
    """The suspects the server's text names (as whole words); a parent only when none of its
    children is named (``stream_options.continuous_usage_stats`` rather than all of it)."""
    named = [p for p in paths if re.search(rf"(?<![\w]){re.escape(p.rsplit('.', 1)[-1])}(?![\w])", text)]
    return [p for p in named if not any(other.startswith(p + ".") for other in named)]


def one_line(text: str | None) -> str:
    return " ".join((text or "no error text").split())
