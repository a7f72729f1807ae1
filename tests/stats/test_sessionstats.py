from loadkit.records import RequestRecord
from loadkit.stats.sessionstats import MAX_TURN, SessionStats


def rec(engine, turn, ttft_ms, outcome="ok", n_in=1000, expected=None, cached=None):
    r = RequestRecord(
        request_id=f"{engine}{turn}{ttft_ms}",
        engine=engine,
        adapter="openai",
        outcome=outcome,
        turn=turn,
        n_in=n_in,
        expected_cached_tokens=expected,
        cached_tokens=cached,
    )
    r.t_send_ns = 0
    if outcome == "ok":
        r.event_t_ns = [int(ttft_ms * 1e6)]
        r.event_tokens = [1]
    return r


def test_turns_and_prefix_ratios():
    s = SessionStats()
    s.add_turn(rec("a", 1, 100, expected=200, cached=0))
    s.add_turn(rec("a", 2, 20, expected=900, cached=896))
    s.add_turn(rec("a", 2, 30, expected=900, cached=900))
    s.add_turn(rec("a", 3, 0, outcome="http_error:500"))
    out = s.report()["a"]["turns"]
    assert out["1"]["ttft_ms"]["p50"] == 100
    assert abs(out["2"]["ttft_ms"]["p99"] - 30) < 0.05
    assert out["2"]["prefix_expected_ratio"] == 0.9
    assert out["2"]["prefix_reported_ratio"] == 0.898
    assert out["3"]["requests"] == 1 and out["3"]["ok"] == 0 and out["3"]["ttft_ms"]["p50"] is None


def test_sessions_outcomes_and_cap():
    s = SessionStats()
    s.add_session("a", "completed", 5, None, "turns_done")
    s.add_session("a", "broken", 3, "http_error:503", None)
    s.add_turn(rec("a", MAX_TURN + 7, 10))
    r = s.report()["a"]
    assert r["sessions"] == 2 and r["broken_at_turn"] == {"3": 1} and r["broken_by"] == {"http_error:503": 1}
    assert f"{MAX_TURN}+" in r["turns"]


def test_wire_roundtrip_and_merge_is_exact():
    a, b, whole = SessionStats(), SessionStats(), SessionStats()
    for i in range(50):
        r = rec("x", 1 + i % 4, 5 + i)
        (a if i % 2 else b).add_turn(r)
        whole.add_turn(r)
    a.add_session("x", "completed", 4, None, "turns_done")
    whole.add_session("x", "completed", 4, None, "turns_done")
    merged = SessionStats.from_wire(a.to_wire())
    merged.merge(SessionStats.from_wire(b.to_wire()))
    assert merged.report() == whole.report()
