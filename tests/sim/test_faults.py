"""Fault injection: each fault forced on one request by header, fractions, determinism, syntax."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator

import pytest

from loadkit.sim.config import ConfigError
from loadkit.sim.faults import FaultPlan, build_plan, fault_from_header, parse_fault_spec
from loadkit.sim.testing import SimHandle, sim_thread
from tests.sim.rawclient import request

BODY = {"model": "m", "prompt": "hello world", "max_tokens": 6, "stream": True, "ignore_eos": True}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    truth = str(tmp_path_factory.mktemp("faults") / "truth.jsonl")
    with sim_thread(
        "openai", decode_base_ms=2.0, truth_log=truth, stall_seconds=0.5, trickle_interval_ms=0.2
    ) as handle:
        yield handle


def forced(sim: SimHandle, fault: str, body: dict[str, object] | None = None, rid: str = "") -> object:
    headers = {"X-Loadkit-Fault": fault, **({"X-Request-ID": rid} if rid else {})}
    return request(sim.port, "POST", "/v1/completions", body or BODY, headers, timeout_s=3)


def truth_of(sim: SimHandle, ids: list[str]) -> dict[str, dict[str, object]]:
    """Truth records of the given request ids, polling until all are flushed (0.5 s period)."""
    deadline = time.monotonic() + 5
    while True:
        got = {r["request_id"]: r for r in sim.truth_records() if r["request_id"] in ids}
        if len(got) == len(ids) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_drop_mid_stream_cuts_the_connection(sim: SimHandle) -> None:
    resp = forced(sim, "drop_mid_stream=2")
    assert resp.status == 200 and not resp.complete  # type: ignore[attr-defined]
    assert len(resp.json_events()) == 2  # type: ignore[attr-defined]


def test_close_early_ends_http_but_not_the_engine_stream(sim: SimHandle) -> None:
    resp = forced(sim, "close_early")
    data = resp.sse_data()  # type: ignore[attr-defined]
    assert resp.complete and "[DONE]" not in data and len(data) == 3  # type: ignore[attr-defined]


def test_malformed_event_then_the_stream_continues(sim: SimHandle) -> None:
    resp = forced(sim, "malformed=1")
    data = resp.sse_data()  # type: ignore[attr-defined]
    bad = [d for d in data if d != "[DONE]" and not _is_json(d)]
    assert len(bad) == 1 and data[-1] == "[DONE]" and data.index(bad[0]) == 1


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_error_event_in_band(sim: SimHandle) -> None:
    resp = forced(sim, "error_event=3")
    events = resp.json_events()  # type: ignore[attr-defined]
    assert resp.status == 200 and events[-1]["error"]["code"] == 500 and len(events) == 4  # type: ignore[attr-defined]


@pytest.mark.parametrize("fault, status", [("http_429", 429), ("http_503", 503), ("http_500", 500)])
def test_http_status_faults(sim: SimHandle, fault: str, status: int) -> None:
    resp = forced(sim, fault)
    assert resp.status == status and resp.json()["error"]["code"] == status  # type: ignore[attr-defined]
    if status == 429:
        assert resp.headers["retry-after"] == "1"  # type: ignore[attr-defined]


def test_retry_after_argument(sim: SimHandle) -> None:
    assert forced(sim, "http_429=7").headers["retry-after"] == "7"  # type: ignore[attr-defined]


def test_stall_after_n_tokens_then_close(sim: SimHandle) -> None:
    resp = forced(sim, "stall_after=2")
    assert len(resp.json_events()) == 2 and not resp.complete  # type: ignore[attr-defined]
    gap_ns = resp.t_chunks_ns[-1] - resp.t_chunks_ns[0]  # type: ignore[attr-defined]
    assert gap_ns < 0.4e9  # the two tokens came quickly; the close came after stall_seconds


def test_trickle_sends_tiny_writes(sim: SimHandle) -> None:
    resp = forced(sim, "trickle=7", {**BODY, "max_tokens": 2})
    assert resp.complete and resp.sse_data()[-1] == "[DONE]"  # type: ignore[attr-defined]
    assert resp.reads > 20  # type: ignore[attr-defined]  # many small pieces, not 3 writes


def test_faults_are_recorded_in_the_truth_log(sim: SimHandle) -> None:
    forced(sim, "http_503", {**BODY, "max_tokens": 3}, "t1")
    forced(sim, "close_early=2", {**BODY, "max_tokens": 3}, "t2")
    forced(sim, "drop_mid_stream=50", {**BODY, "max_tokens": 3}, "t3")  # ends before the fault point
    rec = truth_of(sim, ["t1", "t2", "t3"])
    assert rec["t1"]["fault"] == "http_503" and rec["t1"]["status"] == 503
    assert rec["t2"]["fault"] == "close_early" and rec["t2"]["completion_tokens"] == 2
    assert rec["t3"]["fault"] is None and rec["t3"]["completion_tokens"] == 3


def test_unknown_fault_header_is_a_400(sim: SimHandle) -> None:
    resp = forced(sim, "explode")
    assert resp.status == 400 and "unknown fault" in resp.json()["error"]["message"]  # type: ignore[attr-defined]


def test_fractions_are_seeded_and_roughly_right() -> None:
    plan = build_plan(["http_503=0.25", "drop_mid_stream=0.25"])
    picks = [plan.choose(random.Random(i)) for i in range(2000)]
    again = [plan.choose(random.Random(i)) for i in range(2000)]
    assert picks == again
    n503 = sum(1 for f in picks if f and f.name == "http_503")
    assert 400 < n503 < 600 and sum(1 for f in picks if f is None) > 800


def test_fraction_faults_over_http_are_deterministic_under_seed() -> None:
    def statuses() -> list[int]:
        with sim_thread("openai", faults=["http_503=0.5"], seed=7, decode_base_ms=1.0) as s:
            return [
                request(s.port, "POST", "/v1/completions", {**BODY, "stream": False}).status
                for _ in range(12)
            ]

    first, second = statuses(), statuses()
    assert first == second and 503 in first and 200 in first


@pytest.mark.parametrize("spec, message", [
    ("explode=0.1", "expected NAME=FRACTION"), ("http_503", "expected NAME=FRACTION"),
    ("http_503=1.5", "within"), ("http_503=-0.1", "within"), ("http_503=abc", "not a number"),
    ("http_503=3:0.1", "takes no argument"), ("stall_after=x:0.1", "not an integer"),
    ("trickle=0:0.1", ">= 1"),
])  # fmt: skip
def test_bad_fault_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_fault_spec(spec)


def test_fractions_must_not_exceed_one() -> None:
    with pytest.raises(ConfigError, match="add up to"):
        build_plan(["http_503=0.6", "http_500=0.6"])


def test_header_syntax() -> None:
    assert fault_from_header("stall_after=3").arg == 3
    with pytest.raises(ValueError):
        fault_from_header("stall_after=x")
    assert FaultPlan().choose(random.Random(0)) is None
