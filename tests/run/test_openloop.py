from loadkit.run.openloop import Dispatcher, behind_warning

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


def _run_pool(d: Dispatcher, users: int, service_ms: int, stop_ms: int) -> None:
    """A pool of `users` senders, each busy `service_ms` per request (the server's latency),
    driven on the dispatcher's clock as the Locust users are: take a slot when free, wait for it."""
    free_at = [0] * users
    while True:
        u = min(range(users), key=free_at.__getitem__)
        if free_at[u] >= stop_ms * MS:
            break
        slot = d.next_slot(now_ns=free_at[u])
        if slot is None:
            break
        send = max(free_at[u], slot[0])
        assert d.admit(slot[0], send)
        free_at[u] = send + service_ms * MS
    d.drop_overdue(stop_ms * MS)


def test_every_user_busy_is_said_to_need_users_or_a_faster_server_not_to_blame_the_client():
    # 4 req/s asked (the default scenario's rate), 2 users, a server taking 1 s a request: the
    # pool can send 2 req/s, so slots come due while both users are in flight.
    d = Dispatcher(iter([(i * 0.25, "s") for i in range(200)]), max_lag_s=None, late_s=0.01, t0_ns=0)
    _run_pool(d, users=2, service_ms=1000, stop_ms=10_000)
    s = d.summary()
    assert s["scheduled"] == s["sent"] + s["dropped"] and s["dropped"] > 15
    assert s["no_free_user"] == s["late"] + s["dropped"]  # every late slot found no free user
    text = behind_warning("sim", s, late_threshold_ms=10)
    assert text is not None and "client was the bottleneck" not in text
    assert text.startswith("open-loop schedule fell behind for target sim: every user was busy (in flight)")
    assert "the server is slower than the asked rate, or more users (-u) are needed" in text
    assert f"{s['dropped']} dropped" in text
    assert "self-check also found" in behind_warning("sim", s, 10, client_saturated=True)


def test_enough_users_keep_the_schedule_and_no_warning_is_given():
    d = Dispatcher(iter([(i * 0.25, "s") for i in range(40)]), max_lag_s=None, late_s=0.01, t0_ns=0)
    _run_pool(d, users=8, service_ms=1000, stop_ms=10_000)
    s = d.summary()
    assert (s["late"], s["dropped"], s["no_free_user"]) == (0, 0, 0)
    assert behind_warning("sim", s, late_threshold_ms=10) is None


def test_free_users_sending_late_blame_the_client():
    # Every slot is taken before it is due (a user was free), but sent 30 ms late: the process
    # woke its users late, the client could not keep time.
    d = Dispatcher(iter([(i * 0.1, "s") for i in range(1, 51)]), max_lag_s=None, late_s=0.01, t0_ns=0)
    for _ in range(50):
        t, _ = d.next_slot(now_ns=0)
        assert d.admit(t, t + 30 * MS)
    s = d.summary()
    assert s["late"] == 50 and s["no_free_user"] == 0
    text = behind_warning("sim", s, late_threshold_ms=10)
    assert text is not None and text.startswith("client was the bottleneck for target sim")
    assert "although users were free" in text and "every user was busy" not in text


def test_warning_figures_are_rounded_and_a_run_with_nothing_sent_still_reads():
    s = {
        "scheduled": 5,
        "sent": 0,
        "dropped": 5,
        "late": 0,
        "no_free_user": 5,
        "lag_p50_ms": None,
        "lag_p90_ms": None,
        "lag_p99_ms": None,
        "lag_max_ms": None,
    }
    assert "(lag p99 - ms (limit 10 ms), 0 late, 5 dropped)" in behind_warning("t", s, 10)
    s |= {"sent": 3, "lag_p99_ms": 5490.3439355}
    assert "lag p99 5490.3 ms" in behind_warning("t", s, 10)


def test_one_or_two_late_sends_are_a_hiccup_not_a_fallen_behind_schedule():
    """The README demo on a loaded machine: 1 of 65 sends 14.6 ms late (its p99, being the
    largest of 65), users free, the process at 7 % CPU: no warning. Three late sends are."""
    d = Dispatcher(iter([(i * 0.25, "s") for i in range(1, 66)]), max_lag_s=None, late_s=0.01, t0_ns=0)
    for i in range(65):
        t, _ = d.next_slot(now_ns=0)
        assert d.admit(t, t + (14_600_000 if i in (20, 40) else 200_000))
    s = d.summary()
    assert s["late"] == 2 and s["lag_p99_ms"] > 10
    assert behind_warning("big", s, late_threshold_ms=10) is None
    s["late"] = 3
    assert behind_warning("big", s, late_threshold_ms=10).startswith(
        "client was the bottleneck for target big"
    )


def test_warm_up_slots_are_counted_apart_from_the_schedule():
    """A Mooncake window's cache warm-up (stage "warmup") is outside the measured run: its slots
    are neither scheduled nor in the lag, even when sent very late; they are counted apart."""
    slots = [
        (0.0, "warmup"),
        (0.0, "warmup"),
        (0.0, "warmup"),
        (1.0, "trace"),
        (1.1, "trace"),
        (1.2, "warmup"),
    ]
    d = Dispatcher(iter(slots), max_lag_s=0.5, late_s=0.01, t0_ns=0)
    for _ in range(2):
        t, stage = d.next_slot(now_ns=0)
        assert stage == "warmup"
        assert d.admit(t, t + 400 * MS, stage)  # 400 ms late: sent, but not a late send of the run
    t, stage = d.next_slot(now_ns=900 * MS)  # taken when overdue: not "no free user" of the run
    assert not d.allow(t, t + 900 * MS, stage)  # too late: a warm-up dropped
    t, stage = d.next_slot(now_ns=1000 * MS)
    assert d.admit(t, t + 2 * MS, stage)
    t, stage = d.next_slot(now_ns=1100 * MS)
    d.give_back(stage)  # stopped before it was due: never scheduled
    assert d.drop_overdue(1300 * MS) == 0  # the overdue 1.2 s slot is a warm-up: counted apart
    s = d.summary()
    assert (s["scheduled"], s["sent"], s["dropped"], s["late"], s["no_free_user"]) == (1, 1, 0, 0, 0), s
    assert s["lag_max_ms"] == 2.0
    assert s["warmup"] == {"scheduled": 4, "sent": 2, "dropped": 2}
