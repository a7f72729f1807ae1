import orjson
import pytest

from loadkit.errors import UserError
from loadkit.plugins import new_plugin_manager
from loadkit.servers.detect import detect_engine, probe_server
from loadkit.servers.detectors import match_rules
from tests.helpers.stubserver import Answer, stub_server


def js(obj) -> Answer:
    return Answer(orjson.dumps(obj))


def models(owner: str) -> Answer:
    return js({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]})


SERVERS = {
    "vllm": {("GET", "/version"): js({"version": "0.11.0"}), ("GET", "/v1/models"): models("vllm")},
    "sglang": {
        ("GET", "/get_model_info"): js({"model_path": "Qwen/Qwen2.5", "is_generation": True}),
        ("GET", "/v1/models"): models("sglang"),
    },
    "tgi": {
        ("GET", "/info"): js(
            {"model_id": "bigscience/bloom", "version": "3.0.1", "router": "text-generation-router"}
        )
    },
    "llamacpp": {
        ("GET", "/props"): js({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 4}),
        ("GET", "/v1/models"): models("llamacpp"),
    },
    "ollama": {("GET", "/api/version"): js({"version": "0.12.3"}), ("GET", "/api/tags"): js({"models": []})},
    "tensorrt-llm": {("GET", "/v2"): js({"name": "triton", "version": "2.50.0", "extensions": ["generate"]})},
    "openai": {("GET", "/v1/models"): models("someone")},
}


@pytest.fixture(scope="module")
def pm():
    return new_plugin_manager(load_entry_points=False)


@pytest.mark.parametrize("engine", sorted(SERVERS))
def test_detects_each_engine_and_says_why(engine, pm):
    with stub_server(SERVERS[engine]) as (url, _):
        found = detect_engine(url, pm, timeout_s=2.0)
    assert found.engine == engine
    assert found.explanation.startswith(f"found: {engine}")
    assert "(" in found.explanation  # carries its evidence


def test_triton_suggests_its_api(pm):
    with stub_server(SERVERS["tensorrt-llm"]) as (url, _):
        found = detect_engine(url, pm)
    assert found.api == "triton" and "Triton 2.50.0" in found.explanation


def test_llamacpp_by_server_header_alone():
    probes = {"/v1/models": {"status": 200, "headers": {"server": "llama.cpp"}, "json": None, "text": ""}}
    match = match_rules(probes)
    assert match is not None and match.engine == "llamacpp"


def test_404_bodies_do_not_match():
    probes = {"/info": {"status": 404, "headers": {}, "json": {"model_id": "x"}, "text": ""}}
    assert match_rules(probes) is None


def test_probe_records_status_headers_json():
    with stub_server(SERVERS["tgi"]) as (url, _):
        probes = probe_server(url, ["/info", "/nope"], timeout_s=2.0)
    assert probes["/info"]["status"] == 200 and probes["/info"]["json"]["model_id"] == "bigscience/bloom"
    assert probes["/nope"]["status"] == 404


def test_nothing_listening_is_a_user_error(pm):
    with pytest.raises(UserError, match="nothing answered"):
        detect_engine("http://127.0.0.1:9", pm, timeout_s=0.5)


def test_plugin_detector_runs_before_builtin_rules(pm):
    from loadkit.hookspecs import hookimpl

    class Claims:
        @hookimpl
        def loadkit_detect_engine(self, probes):
            return "tgi" if "/v1/models" in probes else None

    local = new_plugin_manager(load_entry_points=False)
    local.register(Claims(), name="claims")
    with stub_server(SERVERS["vllm"]) as (url, _):
        found = detect_engine(url, local)
    assert found.engine == "tgi" and "installed plugin" in found.explanation


def test_probe_headers_are_sent():
    with stub_server(SERVERS["vllm"]) as (url, server):
        probe_server(url, ["/version"], timeout_s=2.0, headers={"Authorization": "Bearer k"})
    assert server.seen[0][2]["Authorization"] == "Bearer k"


def test_a_broken_plugin_detector_is_named():
    from loadkit.hookspecs import hookimpl

    class Broken:
        @hookimpl
        def loadkit_detect_engine(self, probes):
            raise KeyError("owned_by")

    local = new_plugin_manager(load_entry_points=False)
    local.register(Broken(), name="loadkit-broken")
    with stub_server(SERVERS["vllm"]) as (url, _), pytest.raises(UserError) as info:
        detect_engine(url, local)
    assert (
        str(info.value)
        == "--engine auto: plugin 'loadkit-broken' raised KeyError('owned_by') in loadkit_detect_engine"
    )
