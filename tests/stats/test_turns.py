"""Live reports give the event loop its turns (stats/turns.py, with gevent's hub installed as
the Locust glue does: locust/cooperative.py): sockets are read while a report is built, and
interleaved recording is neither lost nor counted twice."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import gevent
import gevent.socket
import pytest

from loadkit.locust.cooperative import install_gevent_yield
from loadkit.stats import StatsCollector, turns
from loadkit.stats.turns import active, cooperative, give_way
from tests.helpers.records import record

BUSY_S = 0.05


@pytest.fixture(autouse=True)
def gevent_hub() -> Iterator[None]:
    """gevent's hub as the loop to give way to, installed as the glue's init listener does."""
    before = turns.set_yield(None)
    install_gevent_yield()
    yield
    turns.set_yield(before)


def _busy_with_turns(seconds: float) -> float:
    """Hold the loop for ``seconds`` of CPU, calling give_way() as the stats code does;
    returns the perf_counter at which the work ended."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(200):
            pass
        give_way()
    return time.perf_counter()


def _read_during(work) -> tuple[float, float]:
    """(when a greenlet waiting on a socket got its bytes, when ``work`` ended): the bytes are
    in the kernel before the work starts, so only the loop's turns decide when they are read."""
    a, b = socket.socketpair()
    reader_end = gevent.socket.socket(fileno=b.detach())
    got: list[float] = []

    def reader() -> None:
        reader_end.recv(16)
        got.append(time.perf_counter())

    g = gevent.spawn(reader)
    gevent.sleep(0.01)  # the reader is parked on its socket
    a.send(b"token")
    done = work()
    g.join(timeout=2)
    a.close()
    reader_end.close()
    assert got, "the reader never ran"
    return got[0], done


def test_a_socket_is_read_while_cooperative_work_runs():
    def work() -> float:
        with cooperative():
            return _busy_with_turns(BUSY_S)

    read_at, done_at = _read_during(work)
    # Read while the work still ran, not after it (sleep(0) alone would not poll the socket
    # before gevent's 5 ms switch interval, checked only every 50 callbacks).
    assert read_at < done_at - BUSY_S / 2, (read_at, done_at)


def test_outside_a_cooperative_block_give_way_does_not_switch():
    read_at, done_at = _read_during(lambda: _busy_with_turns(BUSY_S))
    assert read_at >= done_at  # the final report's work stays atomic


def test_without_an_installed_loop_cooperative_work_stays_atomic():
    # The stats import no event loop: until the glue installs one, nothing yields.
    turns.set_yield(None)

    def work() -> float:
        with cooperative():
            assert not active()
            return _busy_with_turns(BUSY_S)

    read_at, done_at = _read_during(work)
    assert read_at >= done_at


def test_the_hub_never_becomes_cooperative():
    seen: list[bool] = []

    def in_hub() -> None:
        with cooperative():
            seen.append(active())

    gevent.get_hub().loop.run_callback(in_hub)
    gevent.sleep(0.01)
    assert seen == [False]


def test_live_reports_interleaved_with_recording_lose_and_double_nothing():
    collector = StatsCollector()
    n_writer, reports = 400, []

    def writer() -> None:
        for i in range(n_writer):
            collector.add_scheduled()
            collector.add(record(ttft_ms=10 + i % 50, gaps_ms=(5.0,) * 20))
            if i % 10 == 0:
                gevent.sleep(0)

    def reader() -> None:
        while len(reports) < 30:
            with cooperative():
                reports.append(collector.report())
            gevent.sleep(0)

    gevent.joinall([gevent.spawn(writer), gevent.spawn(reader)], raise_error=True)
    for live in reports:  # each live document is consistent with itself
        assert live["conservation"]["holds"], live["conservation"]
        assert live["conservation"]["in_flight"] >= 0
    final = collector.report()
    e = final["engines"]["e"]
    assert e["requests"] == n_writer and e["ttft_ms"]["count"] == n_writer
    assert e["itl_ms"]["count"] == 20 * n_writer and final["conservation"]["holds"]


def test_a_batch_flush_in_the_hot_path_gives_way():
    """The flush a finished request sets off at FLUSH_RECORDS (ms of numpy work) runs in the
    finishing user's greenlet while other streams are open: it gives way too."""
    from loadkit.stats.aggregate import FLUSH_RECORDS, GroupStats

    group = GroupStats()
    for i in range(FLUSH_RECORDS - 1):
        group.add(record(ttft_ms=10 + i % 37, gaps_ms=(5.0,) * 7))
    last = record(ttft_ms=12, gaps_ms=(5.0,) * 7)

    def work() -> float:
        group.add(last)  # the 2048th record: the batch flush
        return time.perf_counter()

    read_at, done_at = _read_during(work)
    assert read_at < done_at, (read_at, done_at)
    assert not any(group.pending.values()) and group.hists["ttft_ms"].count == FLUSH_RECORDS
