"""Plugin wire protocols for the simulator: registration rules, and a tiny NDJSON protocol
served with the simulator's batching, faults and truth log, read by a matching adapter."""

import http.client

import orjson
import pytest

from loadkit import hookimpl
from loadkit import types as t
from loadkit.client.timer import Timeouts, run_request
from loadkit.engines.base import EngineAdapter, StreamParser
from loadkit.plugins import new_plugin_manager
from loadkit.sim import protocols
from loadkit.sim.protocols import (
    GenRoute,
    Outcome,
    ProtocolError,
    RequestSpec,
    SimProtocol,
    StreamFormat,
    routes_of,
)
from loadkit.sim.testing import sim_thread


def parse_tiny(body, default_max, model):
    if not isinstance(body.get("q"), str):
        raise ValueError("q must be a string")
    return RequestSpec(
        prompt=body["q"], max_tokens=int(body.get("n", default_max)), stream=True, model=model, exact=True
    )


class TinyFormat(StreamFormat):
    content_type = "application/x-ndjson"
    ndjson = True
    fixed_frame = True

    def token(self, text, index, n):
        return b'{"t":"' + text + b'"}\n'

    def end(self, out: Outcome):
        return orjson.dumps({"end": True, "n": out.completion_tokens}) + b"\n"

    def error(self, message):
        return orjson.dumps({"err": message}) + b"\n"

    def malformed(self):
        return b'{"t":\n'


TINY = SimProtocol(
    "tiny",
    {"/tiny": GenRoute(parse_tiny, TinyFormat, lambda s, m: orjson.dumps({"err": m}))},
    info=lambda e: {("GET", "/who"): lambda b: (200, orjson.dumps({"model": e.model}), "application/json")},
)


class TinyParser(StreamParser):
    def parse(self, data, event=None):
        obj = orjson.loads(data)
        if "err" in obj:
            return t.TokenEvent(error=obj["err"])
        if obj.get("end"):
            return t.TokenEvent(done=True, usage=t.Usage(completion_tokens=obj["n"]))
        if not isinstance(obj.get("t"), str):
            raise t.MalformedEvent(data)
        return t.TokenEvent(tokens=1, text=obj["t"])


class TinyAdapter(EngineAdapter):
    name, framing, apis = "tiny", "ndjson", ("tiny",)

    def build_request(self, request):
        return t.HttpRequest(
            "POST", "/tiny", orjson.dumps({"q": request.prompt, "n": request.max_tokens}), self.base_headers()
        )

    def new_parser(self):
        return TinyParser()


class Plugin:
    def __init__(self, *found):
        self.found = found

    @hookimpl
    def loadkit_register_sim_protocols(self, register):
        for p in self.found:
            register(p)


def collect_from(*found):
    pm = new_plugin_manager(load_entry_points=False)
    pm.register(Plugin(*found), name="loadkit-tiny")
    return protocols.collect(pm)


def test_collect_and_refuse_clashes():
    assert collect_from(TINY) == {"tiny": TINY}
    with pytest.raises(ProtocolError, match="'loadkit-tiny'.*'openai' already exists"):
        collect_from(SimProtocol("openai", TINY.routes))
    with pytest.raises(ProtocolError, match="already exists"):
        collect_from(TINY, TINY)
    with pytest.raises(ProtocolError, match="not a SimProtocol"):
        collect_from("tiny")
    with pytest.raises(KeyError, match="unknown simulator engine family 'nope'"):
        routes_of("nope")


def test_served_with_truth_log_and_faults(tmp_path, monkeypatch):
    monkeypatch.setattr(protocols, "plugin_protocols", lambda: {"tiny": TINY})
    log = tmp_path / "truth.jsonl"
    with sim_thread("tiny", truth_log=str(log)) as sim:
        ok = run_request(
            TinyAdapter(),
            sim.url,
            t.GenerationRequest(prompt="hello", max_tokens=7),
            timeouts=Timeouts(connect_s=2, first_token_s=5, total_s=10),
        )
        bad = run_request(
            TinyAdapter(),
            sim.url,
            t.GenerationRequest(prompt="x", max_tokens=7),
            timeouts=Timeouts(connect_s=2, first_token_s=5, total_s=10),
            extra_headers={"x-loadkit-fault": "error_event"},
        )
        records = {r["request_id"]: r for r in sim.wait_truth(2)}
        conn = http.client.HTTPConnection(sim.host, sim.port, timeout=5)
        conn.request("GET", "/who")
        who = orjson.loads(conn.getresponse().read())
    assert who == {"model": sim.engines[0].model}  # the protocol's own info endpoint
    assert ok.outcome == t.OK and (ok.n_out, ok.n_out_source) == (7, "usage"), ok.error
    assert (
        len(ok.event_t_ns) == len(records[ok.request_id]["t_token_ns"])
        and records[ok.request_id]["engine"] == "tiny"
    )
    assert bad.outcome == t.IN_BAND_ERROR and "simulated engine error" in (bad.error or "")
    assert records[bad.request_id]["fault"] == "error_event"
