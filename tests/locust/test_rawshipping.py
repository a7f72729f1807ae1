"""The shipping messages between a worker and a master, wired to each other in one process
(no Locust: a runner's register_message / send_message), on two directories or on one."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

import gevent
import gevent.event

from loadkit.locust import rawshipping
from loadkit.locust.rawshipping import RawLogShipping
from loadkit.stats import rawship, wallclock
from loadkit.stats.rawlog import raw_log_name


class Runner:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}
        self.peer: Runner | None = None

    def register_message(self, name: str, handler: Any) -> None:
        self.handlers[name] = handler

    def send_message(self, name: str, data: Any = None, client_id: str | None = None) -> None:
        assert self.peer is not None
        self.peer.handlers[name](environment=None, msg=SimpleNamespace(type=name, data=data, node_id="w1"))


def pair(master_dir: str, connected: bool = False) -> tuple[RawLogShipping, RawLogShipping, Any]:
    """``connected``: the worker's runner has a connection event, set, as a Locust worker's."""
    wr, mr = Runner(), Runner()
    if connected:
        wr.connection_event = gevent.event.Event()  # type: ignore[attr-defined]
        wr.connection_event.set()  # type: ignore[attr-defined]
    wr.peer, mr.peer = mr, wr
    worker_stats = SimpleNamespace(runner=wr, role="worker", collector=SimpleNamespace(raw_log=None))
    master_stats = SimpleNamespace(runner=mr, role="master", report_dir=master_dir)
    return RawLogShipping(worker_stats), RawLogShipping(master_stats), worker_stats


def test_a_worker_on_another_filesystem_ships_its_log_and_leaves_no_token(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    worker, master, stats = pair(run)
    log = tmp_path / "worker-disk" / raw_log_name(1)  # the worker's own disk
    log.parent.mkdir()
    log.write_bytes(b"".join(b'{"i": %d}\n' % i for i in range(30000)))  # ~0.4 MB: chunks, a window
    token_on_own_disk(stats.runner, run, 1, log.parent / "token")
    worker.start_worker(run, str(log), 1)
    assert worker.ship is True
    worker.tick()
    worker.ship_rest()
    master.close()
    assert (tmp_path / "run" / raw_log_name(1)).read_bytes() == log.read_bytes()
    assert master.logs[1].held_lines == 30000 and master.logs[1].chunks > 1
    assert os.listdir(run) == [raw_log_name(1)]


def test_a_worker_writing_into_the_master_s_directory_ships_nothing(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    worker, master, _ = pair(run)
    log = os.path.join(run, raw_log_name(0))
    with open(log, "wb") as f:
        f.write(b'{"i": 1}\n')
    worker.start_worker(run, log, 0)
    assert worker.ship is False and master.logs == {} and 0 in master.shared
    assert os.listdir(run) == [raw_log_name(0)]  # the token is gone once answered
    assert master.manifest_fields()["raw_log_shipping"]["worker0"]["mode"].startswith("shared")


def test_the_measured_offset_is_applied_at_the_start_only_beyond_its_uncertainty(tmp_path):
    worker, _, _ = pair(str(tmp_path))
    try:
        worker.clock.add(t1=0, t2=3_000_500_000, t3=3_000_500_000, t4=1_000_000)  # 3 s ahead, rtt 1 ms
        worker.correct_clock()
        assert wallclock.correction_ns() == 3_000_000_000
        assert worker.payload_fields()["clock"]["applied_ms"] == 3000.0
        near, _, _ = pair(str(tmp_path))
        near.clock.add(t1=0, t2=1_200_000, t3=1_200_000, t4=2_000_000)  # 0.2 ms, ± 1 ms
        near.correct_clock()
        assert wallclock.correction_ns() == 0
    finally:
        wallclock.set_correction(0)


class Link:
    """Locust's worker link as the stop sees it: the master's answers queue up and reach the
    worker only through ``client.recv`` (its message loop is the greenlet running the stop)."""

    def __init__(self) -> None:
        self.queue: list[Any] = []
        self.handled: list[str] = []

    def recv(self) -> Any:
        while not self.queue:
            gevent.sleep(0.01)
        return self.queue.pop(0)


def queued_pair(run: str) -> tuple[RawLogShipping, RawLogShipping, Runner, Link]:
    worker, master, stats = pair(run)
    wr, link = stats.runner, Link()
    wr.client = link
    wr.handle_message = lambda msg: link.handled.append(msg.type)
    mr = wr.peer

    def to_worker(name: str, data: Any = None, client_id: str | None = None) -> None:
        if name in ("loadkit_rawlog_ack",):
            link.queue.append(SimpleNamespace(type=name, data=data, node_id="master"))
        else:
            wr.handlers[name](environment=None, msg=SimpleNamespace(type=name, data=data, node_id="master"))

    mr.send_message = to_worker
    return worker, master, wr, link


def token_on_own_disk(runner: Any, run: str, index: int, dest: Any) -> None:
    """Worker ``index`` on another host: at its hello, its share token moves from the master's
    directory ``run`` to ``dest`` on its own disk (the master cannot see it there)."""
    send = runner.send_message

    def from_another_host(name: str, data: Any = None, client_id: str | None = None) -> None:
        if name == "loadkit_rawlog_hello":
            os.replace(os.path.join(run, f".loadkit-share-worker{index}"), dest)
        send(name, data, client_id)

    runner.send_message = from_another_host


def another_host_log(tmp_path: Any, run: str, stats_runner: Runner, lines: int) -> Any:
    log = tmp_path / "worker-disk" / raw_log_name(1)
    log.parent.mkdir()
    log.write_bytes(b"".join(b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * 60) for i in range(lines)))
    token_on_own_disk(stats_runner, run, 1, log.parent / "token")
    return log


def test_the_stop_ships_the_rest_in_the_window_waiting_for_acknowledgements(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    worker, master, wr, link = queued_pair(run)
    log = another_host_log(tmp_path, run, wr, 60000)  # ~5 MB: several windows
    in_flight: list[int] = []
    send = wr.send_message

    def counting(name: str, data: Any = None, client_id: str | None = None) -> None:
        if name == "loadkit_rawlog":
            assert worker.reader is not None  # sent and not yet acknowledged, this chunk included
            in_flight.append(data["offset"] + len(data["data"]) - worker.reader.acked)
        send(name, data, client_id)

    wr.send_message = counting
    worker.start_worker(run, str(log), 1)
    link.queue.append(SimpleNamespace(type="heartbeat", data={}, node_id="master"))  # Locust's own
    done = worker.ship_rest()  # within half of --final-report-wait (5 s)
    master.close()
    assert (tmp_path / "run" / raw_log_name(1)).read_bytes() == log.read_bytes()
    assert max(in_flight) <= rawship.WINDOW_BYTES + rawship.CHUNK_BYTES, max(in_flight)
    assert done is True
    assert worker.reader is not None and worker.reader.all_acked()
    gevent.sleep(0.05)
    assert link.handled == ["heartbeat"]  # handed back to Locust after the stop


def test_the_stop_gives_up_after_its_timeout_when_nothing_is_acknowledged(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    worker, master, wr, link = queued_pair(run)
    log = another_host_log(tmp_path, run, wr, 100)
    worker.start_worker(run, str(log), 1)
    send = wr.send_message
    wr.send_message = lambda name, data=None, client_id=None: (
        None if name == "loadkit_rawlog" else send(name, data)
    )
    started = time.monotonic()
    assert worker.ship_rest(timeout=0.5) is False
    assert 0.5 <= time.monotonic() - started < 3


def test_a_window_lost_whole_is_sent_again_after_the_timeout(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    worker, master, stats = pair(run)
    log = another_host_log(tmp_path, run, stats.runner, 30000)
    worker.start_worker(run, str(log), 1)
    send = stats.runner.send_message
    lose = [True]

    def lossy(name: str, data: Any = None, client_id: str | None = None) -> None:
        if not (name == "loadkit_rawlog" and lose[0]):
            send(name, data, client_id)

    stats.runner.send_message = lossy
    worker.tick()
    lose[0] = False
    worker.tick()  # the window is full and nothing came back: nothing to send yet
    assert 1 not in master.logs or master.logs[1].held_bytes == 0
    worker.tick(resend_after=0.0)  # the timeout: from what the master holds
    while worker.reader is not None and worker.reader.sent < log.stat().st_size:
        worker.tick()
    master.close()
    assert (tmp_path / "run" / raw_log_name(1)).read_bytes() == log.read_bytes()
    assert worker.reader is not None and worker.reader.resends == 1


def test_a_restarted_process_resumes_the_log_where_the_master_holds_it(tmp_path, monkeypatch):
    run = str(tmp_path / "run")
    os.makedirs(run)
    first, master, stats = pair(run)
    log = another_host_log(tmp_path, run, stats.runner, 30000)  # ~2.5 MB
    first.start_worker(run, str(log), 1)
    send, chunks = stats.runner.send_message, []

    def dies_after_three(name: str, data: Any = None, client_id: str | None = None) -> None:
        chunks.append(name)
        if chunks.count("loadkit_rawlog") <= 3:
            send(name, data, client_id)

    stats.runner.send_message = dies_after_three
    first.tick()  # three chunks arrive, then the process dies: the master holds a prefix
    held = master.logs[1].held_bytes
    assert 0 < held < log.stat().st_size
    # The restarted process (same host, same volume) on a new link to the same master finds a
    # log on its disk it did not write, asks which lost workers said hello from its host, resumes it.
    master.stats.collector = SimpleNamespace(remote=SimpleNamespace(lost=lambda: [SimpleNamespace(index=1)]))
    again, _, again_stats = pair(run)
    again_stats.runner.peer = master.runner
    master.runner.peer = again_stats.runner
    again.local_path = lambda run, index: str(log.parent / raw_log_name(index))  # type: ignore[method-assign]
    monkeypatch.setattr(rawshipping, "RESUME_ASK_FOR_S", 0.01)
    monkeypatch.setattr(rawshipping, "RESUME_ASK_S", 0.01)
    again.resume_loop(str(log.parent))
    entry = again.resumed[1]
    assert entry.ship is True and entry.reader is not None and entry.reader.sent == held
    assert master.pending()  # the master waits for the rest before its report
    assert again.ship_rest(timeout=10) is True
    assert not master.pending()
    master.close()
    shipped = master.logs[1]
    assert (tmp_path / "run" / raw_log_name(1)).read_bytes() == log.read_bytes()
    assert shipped.duplicates == 0 and shipped.held_lines == 30000 and shipped.complete()
    assert master.manifest_fields()["raw_log_shipping"]["worker1"]["resumed_at"] == held
    asked = []
    again_stats.runner.handlers["loadkit_rawlog_lost_reply"] = lambda **kw: asked.append(kw)
    again.resume_loop(str(log.parent))
    assert asked == []  # resumed once: not offered again


def test_a_fresh_worker_asks_nothing_about_lost_logs_and_a_restarted_one_asks(tmp_path, monkeypatch):
    """Only a process that finds on its disk a raw log it did not write, and that nothing wrote
    since it started, asks the master about lost workers: a fresh worker (its own log alone, or
    beside a live sibling's) sends no such question; a restarted one does, naming that log."""
    monkeypatch.setattr(rawshipping, "RESUME_ASK_FOR_S", 0.05)
    monkeypatch.setattr(rawshipping, "RESUME_ASK_S", 0.01)
    run = str(tmp_path / "run")
    os.makedirs(run)
    worker, master, stats = pair(run, connected=True)
    master.stats.collector = SimpleNamespace(remote=SimpleNamespace(lost=lambda: []))
    time.sleep(0.02)  # files' times have a coarser clock
    log = another_host_log(tmp_path, run, stats.runner, 10)
    (log.parent / raw_log_name(2)).write_bytes(b'{"i": 0}\n')  # a sibling's, written since the start
    (log.parent / "requests.jsonl").write_bytes(b"")  # not a worker's
    sent: list[str] = []
    send = stats.runner.send_message

    def counting(name: str, data: Any = None, client_id: str | None = None) -> None:
        sent.append(name)
        send(name, data, client_id)

    stats.runner.send_message = counting
    worker.start_worker(run, str(log), 1)
    gevent.sleep(0.1)
    assert worker.ship is True and "loadkit_rawlog_hello" in sent
    assert "loadkit_rawlog_lost" not in sent and worker.others_logs(str(log.parent)) == []

    dead = log.parent / raw_log_name(5)  # an earlier process's, on this volume
    dead.write_bytes(b'{"i": 0}\n')
    time.sleep(0.02)
    restarted, _, restarted_stats = pair(run, connected=True)
    restarted_stats.runner.peer, master.runner.peer = master.runner, restarted_stats.runner
    time.sleep(0.02)
    for live in (log, log.parent / raw_log_name(2)):  # the siblings go on writing
        with open(live, "ab") as f:
            f.write(b'{"i": 1}\n')
    token_on_own_disk(restarted_stats.runner, run, 6, log.parent / "token6")
    questions: list[Any] = []
    master.runner.handlers["loadkit_rawlog_lost"] = lambda environment, msg: questions.append(msg.data)
    restarted.start_worker(run, str(log.parent / raw_log_name(6)), 6)
    gevent.sleep(0.2)
    assert restarted.ship is True
    assert questions and all(q["workers"] == [5] for q in questions)  # the log it found, not the sibling's
    assert len(questions) <= 0.05 / 0.01 + 1


def test_a_resume_is_refused_for_another_host_another_log_or_a_log_gone(tmp_path, monkeypatch):
    run = str(tmp_path / "run")
    os.makedirs(run)
    first, master, stats = pair(run)
    log = another_host_log(tmp_path, run, stats.runner, 100)
    first.start_worker(run, str(log), 1)
    first.tick()
    monkeypatch.setattr(rawshipping.socket, "gethostname", lambda: "elsewhere")
    other, _, other_stats = pair(run)
    other_stats.runner.peer, master.runner.peer = master.runner, other_stats.runner
    entry = other.resume_worker(run, str(log), 1)
    assert entry.ship is False and "not this host's" in (entry.refused or "")
    monkeypatch.undo()
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(b"X" + log.read_bytes()[1:])
    entry = other.resume_worker(run, str(changed), 1)
    assert entry.ship is False and "does not begin with" in (entry.refused or "")
    entry = other.resume_worker(run, str(tmp_path / "gone.jsonl"), 1)
    assert entry.ship is False and "gone" in (entry.refused or "")
    entry = other.resume_worker(run, str(log), 7)
    assert entry.ship is False and "ships no raw log of worker 7" in (entry.refused or "")
    assert other.ship_rest(timeout=0.1) is True  # nothing to ship


def test_a_worker_that_logs_nothing_has_an_empty_log_on_the_master_too(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    worker, master, stats = pair(run)
    log = another_host_log(tmp_path, run, stats.runner, 0)
    worker.start_worker(run, str(log), 1)
    assert worker.ship_rest(timeout=1) is True
    master.close()
    assert (tmp_path / "run" / raw_log_name(1)).read_bytes() == b""
