"""The shipping messages between a worker and a master, wired to each other in one process
(no Locust: a runner's register_message / send_message), on two directories or on one."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from loadkit.locust.rawshipping import RawLogShipping
from loadkit.stats import wallclock
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


def pair(master_dir: str) -> tuple[RawLogShipping, RawLogShipping, Any]:
    wr, mr = Runner(), Runner()
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
    send = stats.runner.send_message

    def from_another_host(name: str, data: Any = None, client_id: str | None = None) -> None:
        if name == "loadkit_rawlog_hello":  # its token is on its own disk, not the master's
            os.replace(os.path.join(run, ".loadkit-share-worker1"), log.parent / "token")
        send(name, data, client_id)

    stats.runner.send_message = from_another_host
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
