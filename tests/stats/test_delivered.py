"""Delivered load: asked vs realised arrivals, the numpy-only KS test, concurrency, the wire."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.stats as st

from loadkit.report.console import delivered_lines
from loadkit.report.delivered import delivered_section
from loadkit.stats.delivered import CAP, FULL_EVERY, DeliveredLoad, concurrency, one_context
from loadkit.stats.goodness import gamma_cdf, ks_one_sample, ks_two_sample, regularized_gamma_p


@dataclass
class Rec:
    engine: str
    stage: str | None
    t_send_ns: int
    t_end_ns: int | None
    t_sched_ns: int | None


def load_from(sends_s, durations_s=0.05, engine="sim", stage="main", scheduled=True) -> DeliveredLoad:
    d = DeliveredLoad()
    d.wall_offset_ns = 0
    for t in sends_s:
        ns = int(t * 1e9)
        d.add(Rec(engine, stage, ns, ns + int(durations_s * 1e9), ns if scheduled else None))
    return d


@pytest.mark.parametrize("a", [0.25, 1.0, 4.0, 30.0])
def test_incomplete_gamma_matches_scipy(a):
    x = np.linspace(0, 60, 400)
    assert np.max(np.abs(regularized_gamma_p(a, x) - st.gamma.cdf(x, a))) < 1e-12


@pytest.mark.parametrize("n", [25, 200, 3000])
def test_ks_matches_scipy(n):
    rng = np.random.default_rng(n)
    g = rng.gamma(4.0, 0.5, n)
    d, p = ks_one_sample(g, gamma_cdf(0.5, 0.5))  # mean 2 s, CV 0.5 = shape 4, scale 0.5
    ref = st.kstest(g, st.gamma(4.0, scale=0.5).cdf)
    assert d == pytest.approx(ref.statistic, abs=1e-12) and p == pytest.approx(ref.pvalue, abs=0.03)
    h = rng.exponential(1.0, n + 11)
    d2, p2 = ks_two_sample(g, h)
    ref2 = st.ks_2samp(g, h, method="asymp")
    assert d2 == pytest.approx(ref2.statistic, abs=1e-12) and p2 == pytest.approx(ref2.pvalue, abs=0.01)


def test_poisson_as_asked_passes_and_a_burstier_process_fails():
    rng = np.random.default_rng(7)
    arrival = {"model": "poisson", "rate": 20.0}
    good = load_from(np.cumsum(rng.exponential(1 / 20, 2000))).report(one_context(arrival))
    row = good["by_target"]["sim"]["stages"]["main"]
    assert row["asked"] == {"model": "poisson", "rate": 20.0, "cv": 1.0}
    assert row["realised"]["rate"] == pytest.approx(20.0, rel=0.06) and row["realised"][
        "cv"
    ] == pytest.approx(1, abs=0.08)
    assert row["fit"]["test"] == "ks vs exponential" and row["fit"]["consistent"]
    # Same mean rate, CV 2: the rate matches, the test says it is not what was asked.
    bursty = np.cumsum(rng.gamma(0.25, 1 / (20 * 0.25), 2000))
    bad = load_from(bursty).report(one_context(arrival))["by_target"]["sim"]["stages"]["main"]
    assert bad["realised"]["cv"] > 1.6 and not bad["fit"]["consistent"] and bad["fit"]["p_value"] < 1e-6


def test_gamma_stage_and_trace_asked_sides():
    rng = np.random.default_rng(3)
    arrival = {
        "model": "gamma",
        "rate": 5.0,
        "cv": 2.0,
        "stages": [{"duration_s": 100, "rate": 5.0, "cv": 2.0}],
    }
    sends = np.cumsum(rng.gamma(0.25, 1 / (5 * 0.25), 400))
    row = load_from(sends, stage="stage1").report(one_context(arrival))["by_target"]["sim"]["stages"][
        "stage1"
    ]
    assert row["asked"]["cv"] == 2.0 and row["fit"]["test"] == "ks vs gamma" and row["fit"]["consistent"]
    trace = np.cumsum(rng.exponential(0.1, 300)).tolist()
    row = load_from(trace, stage="trace").report(one_context({"model": "trace"}, trace))["by_target"]["sim"][
        "stages"
    ]["trace"]
    assert row["fit"]["test"].startswith("ks-2sample") and row["fit"]["statistic"] < 0.01
    assert row["rate_error"] == pytest.approx(0.0, abs=1e-6)


def test_only_scheduled_requests_are_arrivals():
    d = load_from([0.0, 1.0, 2.0, 3.0])
    extra = load_from([0.5, 1.5], scheduled=False)  # a session's later turns
    d.merge(extra)
    row = d.report(one_context({"model": "constant", "rate": 1.0}))["by_target"]["sim"]["stages"]["main"]
    assert row["requests"] == 6 and row["arrivals"] == 4 and row["realised"]["rate"] == pytest.approx(1.0)
    assert row["fit"]["test"] is None and "constant" in row["fit"]["reason"]


def test_concurrency_peak_and_mean():
    s = np.asarray([0, 10, 20, 30], dtype=np.int64)
    e = np.asarray([25, 15, 30, 40], dtype=np.int64)  # [0,25) [10,15) [20,30) [30,40)
    c = concurrency(s, e)
    assert c["peak"] == 2  # the end at 30 frees its slot before the send at 30
    assert c["mean"] == pytest.approx((25 + 5 + 10 + 10) / 40)


def test_wire_round_trip_merges_to_the_whole():
    rng = np.random.default_rng(1)
    times = np.cumsum(rng.exponential(0.05, 600))
    whole = load_from(times).report(one_context({"model": "poisson", "rate": 20.0}))
    a, b = load_from(times[0::2]), load_from(times[1::2])
    merged = DeliveredLoad.from_wire(a.to_wire())
    merged.merge(DeliveredLoad.from_wire(b.to_wire()))
    got = merged.report(one_context({"model": "poisson", "rate": 20.0}))
    w, g = whole["by_target"]["sim"]["stages"]["main"], got["by_target"]["sim"]["stages"]["main"]
    assert g["realised"]["rate"] == pytest.approx(w["realised"]["rate"], rel=1e-5)  # µs on the wire
    assert g["fit"]["p_value"] == pytest.approx(w["fit"]["p_value"], abs=1e-3)
    assert g["concurrency"]["peak"] == w["concurrency"]["peak"]
    assert g["concurrency"]["mean"] == pytest.approx(w["concurrency"]["mean"], rel=1e-5)


def test_html_and_console_show_the_figures():
    rng = np.random.default_rng(2)
    section = load_from(np.cumsum(rng.exponential(0.05, 300))).report(
        one_context({"model": "poisson", "rate": 20.0})
    )
    report = {"delivered": section}
    page = delivered_section(report)
    assert 'id="delivered"' in page and "ks vs exponential" in page and "20.00" in page
    lines = delivered_lines(report)
    assert (
        len(lines) == 1
        and lines[0].startswith("delivered sim/main: rate ")
        and "(asked poisson 20)" in lines[0]
    )
    assert "not measured" in delivered_section({}).lower()


def _lagged(asked_s, lags_s, engine="sim", stage="trace") -> DeliveredLoad:
    """Sends ``lags_s`` after their scheduled times ``asked_s``."""
    d = DeliveredLoad()
    d.wall_offset_ns = 0
    for t, lag in zip(asked_s, lags_s, strict=True):
        sched = int(t * 1e9)
        d.add(Rec(engine, stage, sched + int(lag * 1e9), sched + 50_000_000, sched))
    return d


def _bursty_trace(rng, n=900):
    """A third of the rows open a burst; the rest follow within 1 ms (60 % of gaps sub-ms)."""
    gaps = [rng.exponential(0.3) if i % 3 == 0 else rng.uniform(0.0, 0.0009) for i in range(n)]
    return np.cumsum(gaps)


def test_a_faithful_replay_of_sub_ms_gaps_is_as_asked_at_the_clients_resolution():
    rng = np.random.default_rng(11)
    trace = _bursty_trace(rng)
    lags = rng.uniform(0.0, 0.004, len(trace))  # every send ≤ 4 ms late
    row = _lagged(trace, lags).report(one_context({"model": "trace"}, trace.tolist()))["by_target"]["sim"][
        "stages"
    ]["trace"]
    assert row["fit"]["resolution_ms"] == 4.0  # the lag p99, whole ms
    assert row["fit"]["consistent"], row["fit"]
    # The same trace's rate sent as Poisson arrivals is still not what it asked.
    poisson = np.cumsum(rng.exponential(trace[-1] / len(trace), len(trace)))
    row = _lagged(poisson, np.zeros(len(trace))).report(one_context({"model": "trace"}, trace.tolist()))
    fit = row["by_target"]["sim"]["stages"]["trace"]["fit"]
    assert fit["resolution_ms"] == 1.0 and not fit["consistent"] and fit["p_value"] < 1e-6, fit


def test_poisson_floored_to_the_resolution_stays_as_asked_and_a_bursty_one_does_not():
    rng = np.random.default_rng(12)
    arrival = {"model": "poisson", "rate": 200.0}  # mean gap 5 ms: flooring to 3 ms matters
    asked = np.cumsum(rng.exponential(1 / 200, 3000))
    lags = rng.uniform(0.0, 0.003, len(asked))
    fit = _lagged(asked, lags, stage="main").report(one_context(arrival))["by_target"]["sim"]["stages"][
        "main"
    ]["fit"]
    assert fit["resolution_ms"] == 3.0 and fit["consistent"], fit
    bursty = np.cumsum(rng.gamma(0.25, 1 / (200 * 0.25), 3000))
    fit = _lagged(bursty, lags, stage="main").report(one_context(arrival))["by_target"]["sim"]["stages"][
        "main"
    ]["fit"]
    assert not fit["consistent"], fit


def test_a_trace_cut_by_the_run_is_asked_only_the_part_it_reached():
    rng = np.random.default_rng(13)
    trace = np.concatenate([np.cumsum(rng.exponential(1.0, 30)), 30 + np.cumsum(rng.exponential(0.1, 600))])
    sent = trace[trace <= 20.0]
    context = {"arrival": {"model": "trace"}, "offsets": trace.tolist(), "covered_s": 20.0}
    row = load_from(sent, stage="trace").report(lambda _t, _c: context)["by_target"]["sim"]["stages"]["trace"]
    assert row["asked"]["rate"] == pytest.approx((len(sent) - 1) / (sent[-1] - sent[0]))
    assert row["rate_error"] == pytest.approx(0.0, abs=1e-6)
    assert row["asked"]["covered_s"] == 20.0 and "covered 20.0 s of the trace's" in row["asked"]["note"]


def test_unknown_pacing_is_not_asked_and_not_judged():
    context = {"not_asked": "user class Paced paces its own tasks"}
    section = load_from(np.arange(50) * 0.1).report(lambda _t, _c: context)
    row = section["by_target"]["sim"]["stages"]["main"]
    assert row["asked"]["model"] == "not asked" and row["rate_error"] is None and row["fit"]["test"] is None
    assert "not asked: user class Paced" in delivered_lines({"delivered": section})[0]
    assert "not asked" in delivered_section({"delivered": section})


def test_decoding_a_full_entry_gives_the_values_sent():
    """A master decodes up to CAP requests per entry and worker snapshot (vectorised): the
    same Python ints and bools as the value-by-value decoding, negative lags included."""
    base = 1_796_219_227_123_456_789
    sends = [i * 997 for i in range(CAP)]
    item = {"engine": "e", "stage": "s", "base": base, "send_us": sends, "end_us": [u + 5_000 for u in sends],
            "scheduled": [i % 3 for i in range(CAP)], "lag_us": [(i % 7) - 3 for i in range(CAP // 2)],
            "classes": ["A"], "truncated": 4}  # fmt: skip
    load = DeliveredLoad.from_wire({"full": True, "entries": [item]})
    key = ("e", "s")
    assert load.sends[key] == [base + u * 1000 for u in sends]
    assert load.ends[key] == [base + (u + 5_000) * 1000 for u in sends]
    assert load.scheduled[key] == [bool(i % 3) for i in range(CAP)]
    assert load.lags[key] == [((i % 7) - 3) * 1000 for i in range(CAP // 2)]
    assert all(type(v) is int for v in load.sends[key][:3] + load.lags[key][:3])
    assert all(type(v) is bool for v in load.scheduled[key][:3])
    assert load.truncated[key] == 4 and load.classes[key] == {"A"}


def _state(load: DeliveredLoad) -> tuple:
    return (load.sends, load.ends, load.scheduled, load.lags, load.classes, load.truncated)


def _wire(data):
    import msgpack

    return msgpack.unpackb(msgpack.packb(data), raw=False, strict_map_key=False)


def _feed(worker: DeliveredLoad, interval: int, rng) -> None:
    for i in range(int(rng.integers(0, 40))):
        ns = (interval * 3 + i * 0.07) * 1e9
        stage = "warmup" if interval < 2 else "main"
        scheduled = bool(rng.integers(0, 2))
        worker.add(Rec(f"e{i % 2}", stage, int(ns), int(ns + 5e7), int(ns - 1e6) if scheduled else None))


@pytest.mark.parametrize(
    "lost",
    [set(), {3}, {1, 5, 9, 13, 30}, {4, 5}, {1, 2}, {4, 5, 19, 20}, {38, 39}],
    ids=["none", "one", "several-single", "two-in-a-row", "first-two", "two-pairs", "last-two"],
)
def test_delivered_deltas_merge_exactly_to_the_cumulative_section(lost, monkeypatch):
    """A worker's periodic sections are deltas; the master's running state equals the worker's
    whole section whenever it got the snapshot (a request never counted twice); after two lost
    in a row the keys wait, marked missing, for the next full section; the final one is whole."""
    import loadkit.stats.delivered as delivered

    monkeypatch.setattr(delivered, "CAP", 150)  # the cap is reached mid-run: truncated counts
    rng = np.random.default_rng(7)
    worker, state, sizes = DeliveredLoad(), None, []
    for k in range(40):
        _feed(worker, k, rng)
        wire = _wire(worker.delta_to_wire())
        sizes.append(sum(len(e["send_us"]) for e in wire["entries"]))
        if k in lost:
            continue
        state = DeliveredLoad.from_wire(wire).continued(state)
        whole = DeliveredLoad.from_wire(_wire(worker.to_wire()))
        if state.missing:  # only after two lost in a row, until a full section
            pairs = [j for j in range(max(1, k - FULL_EVERY), k) if {j - 1, j} <= lost]
            assert pairs, f"snapshot {k}: keys missing with no two snapshots lost in a row before it"
            assert all(state.sends[key] == whole.sends[key][: len(state.sends[key])] for key in state.sends)
        else:
            assert _state(state) == _state(whole)
    state = DeliveredLoad.from_wire(_wire(worker.to_wire())).continued(state)  # the final one
    assert _state(state) == _state(DeliveredLoad.from_wire(_wire(worker.to_wire())))
    assert not state.missing and sum(state.truncated.values()) > 0
    assert max(sizes[1:FULL_EVERY]) < max(sizes) / 2  # deltas carry two intervals, not the run


def test_a_gap_is_reported_until_a_full_section_and_lists_stay_a_prefix():
    worker = load_from([0.1, 0.2])
    state = DeliveredLoad.from_wire(worker.delta_to_wire()).continued(None)  # full (the first)
    for t in (0.3, 0.4, 0.5):  # three snapshots, the first two lost
        worker.add(Rec("sim", "main", int(t * 1e9), int(t * 1e9) + 1000, int(t * 1e9)))
        wire = worker.delta_to_wire()
    state = DeliveredLoad.from_wire(wire).continued(state)
    assert state.missing == {("sim", "main")} and len(state.sends[("sim", "main")]) == 2
    row = state.report(one_context({"model": "poisson", "rate": 10.0}))["by_target"]["sim"]["stages"]["main"]
    assert row["missing_deltas"] is True
    state = DeliveredLoad.from_wire(worker.to_wire()).continued(state)
    assert not state.missing and len(state.sends[("sim", "main")]) == 5


def test_a_malformed_delivered_section_is_refused():
    with pytest.raises(ValueError):
        DeliveredLoad.from_wire([])  # a payload version 2 list
    entry = load_from([0.1]).to_wire()["entries"][0]
    with pytest.raises(ValueError, match="starts"):
        DeliveredLoad.from_wire({"full": True, "entries": [dict(entry, **{"from": 3})]})
