"""Reproducibility and worker shares; trace replay timing (window, speed, loop)."""

from __future__ import annotations

import numpy as np
import pytest

from loadkit.workload import Session, load_scenario
from tests.workload.conftest import TRACES

MIX = """
max_requests = 60
[[parts]]
name = "a"
weight = 2
input = { dist = "lognormal", median = 50, sigma = 0.7 }
output = { dist = "uniform", low = 1, high = 100 }
[[parts]]
name = "b"
input = 7
output = 3
"""


def fingerprint(item) -> tuple:
    if isinstance(item, Session):
        req = item.next_request(None, True)
        return (item.session_id, item.turns_planned, req.messages[-1]["content"], req.max_tokens)
    return (item.label, item.max_tokens, item.n_in_target, item.messages[0]["content"])


def drain(source) -> list:
    return [fingerprint(item) for item in iter(source.next_item, None)]


def test_same_scenario_same_requests_across_loads(write_scenario):
    path = write_scenario(MIX)
    first = drain(load_scenario(path).request_source())
    assert len(first) == 60
    assert first == drain(load_scenario(path).request_source())
    assert {f[0] for f in first} == {"a", "b"}


def test_known_first_request_pins_cross_machine_determinism(write_scenario):
    """numpy PCG64 + SeedSequence (lengths) and SHAKE-128 (words) are specified bit for bit: a change here
    changes every run."""
    req = load_scenario(write_scenario(MIX)).request_source().next_item()
    assert (req.label, req.n_in_target, req.max_tokens) == ("a", 55, 7)
    assert req.messages[0]["content"].split()[:3] == ["sina", "gisu", "mifo"]


def test_different_seed_different_requests(write_scenario):
    a = drain(load_scenario(write_scenario(MIX)).request_source())
    other = write_scenario(
        'schema = "loadkit.scenario/1"\nname = "t"\nseed = 2\n' + MIX, name="b.toml", header=False
    )
    b = drain(load_scenario(other).request_source())
    assert a != b and len(a) == len(b)


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_worker_shares_are_disjoint_and_union_is_the_single_stream(write_scenario, workers):
    sc = load_scenario(write_scenario(MIX))
    single = drain(sc.request_source())
    shares = [drain(sc.request_source(w, workers)) for w in range(workers)]
    assert sum(len(s) for s in shares) == len(single)
    for w, share in enumerate(shares):
        assert share == single[w::workers]  # item i goes to worker i % W, built identically


def test_sessions_are_shared_out_by_index(write_scenario):
    body = "[sessions]\ncount = 9\nturns = 2\nuser_tokens = 5\noutput_tokens = 4\n"
    sc = load_scenario(write_scenario(body))
    single = drain(sc.request_source())
    assert [x[0] for x in drain(sc.request_source(1, 3))] == [single[i][0] for i in (1, 4, 7)]
    assert drain(sc.request_source(2, 3)) == single[2::3]


def test_bad_worker_index_is_refused(write_scenario):
    sc = load_scenario(write_scenario(MIX))
    with pytest.raises(ValueError):
        sc.request_source(3, 3)


def write_timed_csv(tmp_path, times, n=None):
    rows = "\n".join(f"{t},{10 + i},{1 + i}" for i, t in enumerate(times))
    (tmp_path / "t.csv").write_text("ts,inp,out\n" + rows + "\n")


TIMED = """
[arrival]
model = "trace"
[trace]
format = "lengths"
path = "t.csv"
timestamp_column = "ts"
input_column = "inp"
output_column = "out"
"""


def test_trace_window_speed_and_worker_arrivals(write_scenario, tmp_path):
    write_timed_csv(tmp_path, [0, 1, 2, 3, 4, 5, 6, 7])
    sc = load_scenario(write_scenario(TIMED + "start_s = 2\nend_s = 6\nspeed = 2.0\n"))
    src = sc.request_source()
    assert src.trace_arrival_times_s() == [0.0, 0.5, 1.0, 1.5]
    assert [r.n_in_target for r in iter(src.next_item, None)] == [12, 13, 14, 15]
    w1 = sc.request_source(1, 2)
    assert w1.trace_arrival_times_s() == [0.5, 1.5]
    assert [r.n_in_target for r in iter(w1.next_item, None)] == [13, 15]


def test_trace_loop_offsets_each_pass_and_is_bounded(write_scenario, tmp_path):
    write_timed_csv(tmp_path, [0, 1, 2, 3])
    sc = load_scenario(write_scenario("duration_s = 10\n" + TIMED + "loop = true\n"))
    src = sc.request_source()
    # One pass lasts last arrival + one mean gap = 4 s.
    assert src.trace_arrival_times_s() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    items = list(iter(src.next_item, None))
    assert len(items) == 10 and items[0].n_in_target == items[4].n_in_target == 10
    # Each pass gets fresh text: looping must not fake prefix-cache hits.
    assert items[0].messages[0]["content"] != items[4].messages[0]["content"]


def test_loop_without_bound_is_refused(write_scenario, tmp_path):
    write_timed_csv(tmp_path, [0, 1])
    from loadkit.workload import ScenarioError

    with pytest.raises(ScenarioError, match="trace.loop: expected duration_s or max_requests"):
        load_scenario(write_scenario(TIMED + "loop = true\n"))


def test_azure_arrivals_and_lengths_follow_the_csv(write_scenario):
    path = TRACES / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv"
    sc = load_scenario(
        write_scenario(
            f'[arrival]\nmodel = "trace"\n[trace]\nformat = "azure"\npath = "{path}"\n'
            "end_s = 120\nspeed = 4.0\n"
        )
    )
    src = sc.request_source()
    times = np.asarray(src.trace_arrival_times_s())
    lines = path.read_text().splitlines()[1:]
    from datetime import datetime

    stamps = np.asarray([datetime.fromisoformat(line.split(",")[0]).timestamp() for line in lines[:2000]])
    rel = stamps - stamps[0]
    expected = rel[rel < 120] / 4.0
    np.testing.assert_allclose(times, expected, atol=1e-6)
    first = src.next_item()
    assert (first.n_in_target, first.max_tokens) == (374, 44)
    assert src.realised()["input_tokens"]["count"] == 1


def test_realised_summary_reports_lengths(write_scenario):
    src = load_scenario(write_scenario(MIX)).request_source()
    for _ in range(60):
        src.next_item()
    real = src.realised()
    assert real["requests"] == 60 and real["approximate"] is True and real["tokenizer"] == "approx"
    assert sum(real["by_label"].values()) == 60
    hist = real["input_tokens"]["histogram"]
    assert sum(hist["counts"]) == 60 and len(hist["edges"]) == len(hist["counts"]) + 1
    assert real["input_tokens"]["min"] >= 1 and real["output_tokens_asked"]["max"] <= 100


def test_prompt_drift_summary_keeps_unmeasured_apart():
    from loadkit.workload import prompt_drift

    drift = prompt_drift([(100, 100), (100, 104), (50, None), (None, 7), (10, 8)])
    assert drift["count"] == 3 and drift["unmeasured"] == 2
    assert drift["exact_fraction"] == pytest.approx(1 / 3) and drift["max"] == 4 and drift["min"] == -2
    assert drift["mean_abs"] == pytest.approx(2.0)
    assert prompt_drift([(1, None)])["mean"] is None
