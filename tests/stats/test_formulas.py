"""One formula per metric: loadkit.records' milliseconds (the raw log, the API) are exactly the
integer nanoseconds the stats histograms record (loadkit.formulas), divided by 10^6; no view
rounds a request's value differently from another."""

from __future__ import annotations

import pytest

from loadkit import records as rec
from loadkit.records import RequestRecord
from loadkit.stats.aggregate import GroupStats
from loadkit.stats.stagestats import StageCell
from tests.helpers.records import BASE, MS, record

# (histogram name, records.py function); the histograms' names are the ms names.
SCALAR = (("ttft_ms", rec.ttft_ms), ("ttft_sched_ms", rec.ttft_from_schedule_ms), ("tpot_ms", rec.tpot_ms),
          ("e2e_ms", rec.e2e_ms), ("ttft_with_connect_ms", rec.ttft_with_connect_ms), ("connect_ms", rec.connect_ms),
          ("tls_ms", rec.tls_ms), ("ttfat_ms", rec.ttfat_ms), ("ttfrt_ms", rec.ttfrt_ms), ("ttftc_ms", rec.ttftc_ms),
          ("reasoning_ms", rec.reasoning_ms), ("answer_tpot_ms", rec.answer_tpot_ms))  # fmt: skip


def awkward() -> RequestRecord:
    """Timings whose divisions do not come out even: TPOT 1000.333… ns per token, and so on."""
    r = record(
        ttft_ms=123.456789, gaps_ms=(7.5, 30.250002, 1.0), tokens=(1, 3, 1, 2), sched_ms=-4.0, tail_ms=2.0
    )
    r.n_out = 4  # (t_last − t_first) / 3: no whole ns
    r.t_start_ns = r.t_send_ns - 1_234_567
    r.t_connect_ns, r.t_connected_ns, r.t_tls_ns = (
        r.t_start_ns,
        r.t_start_ns + 400_001,
        r.t_start_ns + 900_003,
    )
    events = r.event_t_ns
    r.t_first_reasoning_ns, r.t_reasoning_end_ns = events[0], events[2]
    r.t_first_answer_ns, r.t_last_answer_ns, r.n_answer = events[2], events[3], 3
    r.t_first_tool_ns = events[3]
    return r


def recorded_ns(group: GroupStats, name: str) -> int:
    """The one value a histogram of one request holds, exactly (min and max are exact)."""
    hist = group.hists[name]
    assert hist.count == 1 and hist.min == hist.max, name
    return hist.min


def test_records_ms_are_the_stats_ns_exactly():
    r = awkward()
    group = GroupStats()
    group.add(r)
    group.flush()
    for name, ms in SCALAR:
        value = ms(r)
        assert value is not None, name
        assert value == recorded_ns(group, name) / MS, name  # ==, not approx
    # Per chunk and per token ITL: the histograms' exact sums, min and max.
    chunks = [v * MS for v in rec.itl_chunk_ms(r)]
    hist = group.hists["itl_chunk_ms"]
    assert (hist.min, hist.max) == (min(chunks), max(chunks))
    per_token = sum(round(v * MS) * k for v, k in rec.itl_token_ms(r))
    assert group.hists["itl_ms"].total == per_token
    assert group.hists["itl_chunk_ms"].total == sum(round(v * MS) for v in rec.itl_chunk_ms(r))


def test_tpot_is_rounded_to_the_ns_once_for_every_view():
    r = awkward()
    span = r.event_t_ns[-1] - r.event_t_ns[0]
    assert span % 3, "the test needs a TPOT that is not a whole ns"
    assert rec.tpot_ms(r) == ((2 * span + 3) // 6) / MS
    group, cell = GroupStats(), StageCell()
    group.add(r)
    group.flush()
    cell.add(r, None)
    # The stage (and tenant) cells hold the same ns as the engine section: equal, not within 1 %.
    for name in ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms"):
        assert cell.hists[name] == group.hists[name], name
        assert cell.summary(None)[name]["p50"] == group.hists[name].percentile(0.5) / MS


def test_not_measured_is_none_in_both():
    r = record(ttft_ms=None, gaps_ms=())
    assert rec.ttft_ms(r) is rec.tpot_ms(r) is rec.ttfat_ms(r) is None
    one = record(gaps_ms=())
    assert rec.tpot_ms(one) is None and rec.ttft_ms(one) == pytest.approx(100.0)
    assert rec.itl_chunk_ms(one) == [] and rec.itl_token_ms(one) == []
    missing_counts = record(gaps_ms=(5.0, 5.0), tokens=(1,))  # fewer token counts than events
    assert rec.itl_token_ms(missing_counts) == [(5.0, 1), (5.0, 1)]
    assert BASE > 0
