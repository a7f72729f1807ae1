from loadkit.glue.openloop import Dispatcher

MS = 1_000_000


def test_slots_follow_schedule_and_conserve():
    d = Dispatcher(
        iter([(0.1, "s"), (0.2, "s"), (0.3, "s"), (0.4, "s")]), max_lag_s=0.05, late_s=0.01, t0_ns=0
    )
    t1, _ = d.next_slot()
    assert t1 == 100 * MS
    assert d.admit(t1, t1 + 2 * MS)  # on time
    t2, _ = d.next_slot()
    assert d.admit(t2, t2 + 20 * MS)  # late but sent
    t3, _ = d.next_slot()
    assert not d.admit(t3, t3 + 60 * MS)  # too late: dropped
    # one slot overdue at stop, none left after
    assert d.drop_overdue(450 * MS) == 1
    s = d.summary()
    assert s["scheduled"] == 4 and s["sent"] == 2 and s["dropped"] == 2 and s["late"] == 1
    assert s["scheduled"] == s["sent"] + s["dropped"]
    assert d.next_slot() is None and d.exhausted


def test_slot_not_yet_due_is_not_dropped_and_give_back():
    d = Dispatcher(iter([(1.0, "s"), (2.0, "s")]), max_lag_s=None)
    assert not d.started and d.drop_overdue(10**12) == 0
    d.start(0)
    assert d.drop_overdue(500 * MS) == 0
    slot = d.next_slot()
    assert slot == (1000 * MS, "s")
    d.give_back()
    assert d.summary()["scheduled"] == 0
    assert d.next_slot() == (2000 * MS, "s")


def test_lag_percentiles_reported_in_ms():
    d = Dispatcher(iter([(i / 100, "s") for i in range(1, 101)]), max_lag_s=None, t0_ns=0)
    for i in range(100):
        t, _ = d.next_slot()
        assert d.admit(t, t + i * MS)
    s = d.summary()
    assert abs(s["lag_p50_ms"] - 49) < 0.1 and abs(s["lag_p99_ms"] - 98) < 0.1
