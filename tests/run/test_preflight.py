"""Pre-flight against scripted strict servers over real loopback HTTP: which fields it drops,
when it refuses, what it says, and that the decision reaches a rebuilt target (a worker's)."""

from __future__ import annotations

import argparse
import socket

import orjson
import pytest

from loadkit.client.timer import Timeouts
from loadkit.run import preflight
from loadkit.run.preflight import PreflightError, check_target, named_paths, probe_request, suspect_paths
from loadkit.run.requestshape import RequestShape
from loadkit.run.runconfig import RunConfig, StartPlan
from loadkit.run.settings import Settings
from loadkit.servers.targets import TargetSpec, build_target
from loadkit.types import GenerationRequest
from tests.helpers.scripted_server import ScriptedServer
from tests.helpers.strict_server import CHAT_FIELDS, StrictOpenAI

TIMEOUTS = Timeouts(2.0, 5.0, 10.0)


def target(url: str, engine: str = "vllm", model: str | None = None, extra_body: dict | None = None):
    t = build_target(TargetSpec("t", url, engine, None, model), None, None)
    RequestShape(extra_body=extra_body or {}).apply(t, [])
    return t


def check(t, strict=False, skip=False, user_keys=frozenset()):
    return check_target(t, probe_request(None), set(user_keys), strict, skip, TIMEOUTS)


def test_suspects_are_what_exact_output_adds_then_stream_options():
    t = target("http://127.0.0.1:9")
    assert suspect_paths(t.adapter, GenerationRequest(messages=[], max_tokens=4), set()) == [
        "ignore_eos", "min_tokens", "stream_options.continuous_usage_stats", "stream_options"]  # fmt: skip
    # Without exact output there is nothing exact to drop; fields the user asked for are never suspects.
    plain = GenerationRequest(messages=[], max_tokens=4, exact_output=False)
    assert suspect_paths(t.adapter, plain, {"stream_options"}) == []
    sglang_native = build_target(TargetSpec("s", "http://127.0.0.1:9", "sglang", "native"), None, None)
    assert suspect_paths(sglang_native.adapter, GenerationRequest(prompt="x"), set()) == [
        "sampling_params.ignore_eos"
    ]


def test_named_paths_prefers_the_most_specific_and_whole_words():
    paths = ["ignore_eos", "min_tokens", "stream_options.continuous_usage_stats", "stream_options"]
    assert named_paths("Unexpected fields in the request: {'min_tokens', 'ignore_eos'}", paths) == [
        "ignore_eos", "min_tokens"]  # fmt: skip
    loc = "extra_forbidden: body.stream_options.continuous_usage_stats"
    assert named_paths(loc, paths) == ["stream_options.continuous_usage_stats"]
    assert named_paths("my_min_tokens_x is odd", paths) == []


def test_422_naming_fields_drops_exactly_those():
    server = StrictOpenAI(allowed=CHAT_FIELDS)
    with ScriptedServer(server) as srv:
        t = target(srv.url)
        verdict = check(t)
    assert verdict.drop == ["ignore_eos", "min_tokens"] and verdict.outcome == "ok" and verdict.requests == 2
    assert (
        len(verdict.notes) == 1
        and "Unexpected fields" in verdict.notes[0]
        and "not exact" in verdict.notes[0]
    )
    first, second = server.posts()
    assert {"ignore_eos", "min_tokens"} <= set(first.body) and not {"ignore_eos", "min_tokens"} & set(
        second.body
    )
    assert second.body["stream_options"]["continuous_usage_stats"] is True  # not named: kept


def test_unnamed_4xx_that_goes_away_without_the_extras_drops_them_all():
    class Picky(StrictOpenAI):
        def __call__(self, raw):
            script = super().__call__(raw)
            body = self.received[-1].body or {}
            if self.received[-1].method == "POST" and ({"ignore_eos", "stream_options"} & set(body)):
                from tests.helpers.strict_server import json_reply

                return json_reply(400, {"error": "bad request"})
            return script

    server = Picky()
    with ScriptedServer(server) as srv:
        verdict = check(target(srv.url))
    assert set(verdict.drop) == {
        "ignore_eos",
        "min_tokens",
        "stream_options.continuous_usage_stats",
        "stream_options",
    }
    assert verdict.outcome == "ok" and len(server.posts()) == 2


def test_strict_request_stops_with_the_servers_text():
    server = StrictOpenAI(allowed=CHAT_FIELDS)
    with ScriptedServer(server) as srv, pytest.raises(PreflightError) as err:
        check(target(srv.url), strict=True)
    text = str(err.value)
    assert "Unexpected fields in the request" in text and "--strict-request" in text
    assert "ignore_eos, min_tokens" in text and "\n" not in text
    assert len(server.posts()) == 1


def test_unknown_model_is_refused_with_the_served_list():
    server = StrictOpenAI(models=("served-a", "served-b"), check_model=True)
    with ScriptedServer(server) as srv, pytest.raises(PreflightError) as err:
        check(target(srv.url, engine="openai", model="wrong"))
    text = str(err.value)
    assert "does not exist" in text and "served-a, served-b" in text and "'wrong'" in text
    # An unlisted model refused without a field named: the model is the cause, no retry.
    assert len(server.posts()) == 1 and [r.path for r in server.received][0] == "/v1/models"


def test_server_that_ignores_the_model_field_is_a_warning():
    server = StrictOpenAI(models=("served-a",))
    with ScriptedServer(server) as srv:
        verdict = check(target(srv.url, engine="openai", model="other"))
    assert verdict.drop == [] and verdict.outcome == "ok" and verdict.served_models == ["served-a"]
    assert len(verdict.notes) == 1 and "ignores the model field" in verdict.notes[0]


def test_persistent_4xx_stops_and_5xx_only_warns():
    with ScriptedServer(StrictOpenAI(fail_status=401)) as srv, pytest.raises(PreflightError) as err:
        check(target(srv.url))
    assert "HTTP 401" in str(err.value) and "the engine is broken" in str(err.value)
    with ScriptedServer(StrictOpenAI(fail_status=503)) as srv:
        verdict = check(target(srv.url))
    assert verdict.outcome == "http_error:503" and "starting anyway" in verdict.notes[0]


def test_dead_target_stops_unless_reachability_check_is_skipped():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(PreflightError) as err:
        check(target(url))
    assert "pre-flight request failed" in str(err.value) and "cannot connect" in str(err.value)
    verdict = check(target(url), skip=True)
    assert verdict.outcome == "connect_error" and "--skip-reachability-check" in verdict.notes[0]


def test_a_dead_target_with_model_given_is_unreachable_not_a_server_without_models():
    """Issue 32: --skip-reachability-check on a dead port said "/v1/models lists no models"."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    verdict = check(target(url, engine="openai", model="m"), skip=True)
    assert len(verdict.notes) == 1, verdict.notes
    note = verdict.notes[0]
    assert "is unreachable" in note and "Connection refused" in note and "--model 'm' not checked" in note
    assert "lists no models" not in note


def test_a_server_without_a_model_list_is_still_said_so():
    with ScriptedServer(StrictOpenAI(models=())) as srv:
        verdict = check(target(srv.url, engine="openai", model="m"))
    assert verdict.outcome == "ok" and verdict.served_models == []
    with ScriptedServer(ScriptedNoModels()) as srv:
        verdict = check(target(srv.url, engine="openai", model="m"))
    assert any("not checked: /v1/models lists no models (HTTP 404)" in n for n in verdict.notes), (
        verdict.notes
    )


class ScriptedNoModels(StrictOpenAI):
    """A server whose /v1/models is not there (404)."""

    def __call__(self, raw):
        from tests.helpers.strict_server import json_reply, parse_request

        if parse_request(raw).method == "GET":
            self.received.append(parse_request(raw))
            return json_reply(404, {"detail": "Not Found"})
        return super().__call__(raw)


def test_a_refusal_without_model_lists_the_served_models():
    """Issue 32: without --model nothing read /v1/models, so the refusal could not name them."""
    server = StrictOpenAI(models=("served-a", "served-b"), check_model=True)
    with ScriptedServer(server) as srv, pytest.raises(PreflightError) as err:
        check(target(srv.url, engine="openai"))
    text = str(err.value)
    assert (
        "The model `default` does not exist" in text
        and "it serves: served-a, served-b (give --model)" in text
    )
    # The list is read only for the refusal (after the retry without loadkit's fields): a start
    # that is accepted costs no extra request.
    assert [r.method for r in server.received] == ["POST", "POST", "GET"]
    with ScriptedServer(StrictOpenAI()) as srv2:
        ok = check(target(srv2.url, engine="openai"))
    assert ok.outcome == "ok" and ok.served_models is None


def test_the_decision_crosses_in_the_run_config_and_rebuilt_targets_apply_it():
    server = StrictOpenAI(allowed=CHAT_FIELDS | {"temperature"})

    options = argparse.Namespace(extra_body='{"temperature": 0}', header=["X-Route: blue"], exact_output=None,
                                 strict_request=False, skip_reachability_check=False)  # fmt: skip
    built = RunConfig(settings=Settings(request=RequestShape.from_options(options)))

    class Runtime:
        scenario = None
        timeouts = TIMEOUTS
        config = built
        start_plan = StartPlan()

    with ScriptedServer(server) as srv:
        runtime = Runtime()
        runtime.targets = [target(srv.url, extra_body={"temperature": 0})]
        before = dict(vars(options))
        preflight.run(runtime)
        assert vars(options) == before  # the decision is not written into the options
        assert runtime.config is built  # it goes into the start plan; the config is never replaced
        wire = runtime.config.to_wire(runtime.start_plan, (0, 2))
        # The wire form: plain data (it travels in a msgpack'd message to each worker).
        assert orjson.loads(orjson.dumps(wire)) == wire
        _, worker_config = RunConfig.from_wire(orjson.loads(orjson.dumps(wire)))
        assert worker_config.dropped_for("t") == ["ignore_eos", "min_tokens"]
        # A worker builds its own target from the same options: the drop applies there too.
        worker_target = build_target(TargetSpec("t", srv.url, "vllm"), None, None)
        RequestShape.from_options(options).apply(worker_target, worker_config.dropped_for("t"))
        body = orjson.loads(worker_target.adapter.build_request(GenerationRequest(prompt="x")).body)
    assert "ignore_eos" not in body and "min_tokens" not in body and body["temperature"] == 0
    assert worker_target.adapter.base_headers()["X-Route"] == "blue"
    fields = preflight.manifest_fields(runtime)
    assert fields["request_options"]["headers"] == {"X-Route": "***"}
    assert fields["preflight"]["t"]["drop"] == ["ignore_eos", "min_tokens"]


def test_a_server_naming_one_field_at_a_time_gets_one_request_per_field():
    class OneAtATime(StrictOpenAI):
        def __call__(self, raw):
            script = super().__call__(raw)
            req = self.received[-1]
            extra = sorted(set(req.body or {}) - CHAT_FIELDS) if req.method == "POST" else []
            if extra:
                from tests.helpers.strict_server import json_reply

                return json_reply(
                    400, {"error": {"message": f"Unrecognized request argument supplied: {extra[0]}"}}
                )
            return script

    server = OneAtATime()
    with ScriptedServer(server) as srv:
        verdict = check(target(srv.url))
    assert verdict.drop == ["ignore_eos", "min_tokens"] and verdict.requests == 3 and verdict.outcome == "ok"
    assert server.posts()[-1].body["stream_options"]["continuous_usage_stats"] is True  # never suspected


def test_when_dropping_fields_is_not_enough_the_last_refusal_is_the_message():
    server = StrictOpenAI(models=("served-a",), allowed=CHAT_FIELDS, check_model=True)
    with ScriptedServer(server) as srv, pytest.raises(PreflightError) as err:
        check(target(srv.url, model="wrong"))
    text = str(err.value)
    assert (
        "The model `wrong` does not exist" in text and "served-a" in text and "Unexpected fields" not in text
    )
    # named fields dropped, then every suspect: all still refused for the model.
    assert len(server.posts()) == 3
