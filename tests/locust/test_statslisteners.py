"""The Locust glue inside one process: events in, report files and exit code out."""

from __future__ import annotations

import argparse
import json

from locust import User, task
from locust.env import Environment

from loadkit.stats import install_stats
from loadkit.stats.distributed import PAYLOAD_KEY
from tests.helpers.records import record


class Idle(User):
    @task
    def nothing(self) -> None:  # never run: these tests fire the events themselves
        pass


def _env(tmp_path, **options) -> Environment:
    parsed = argparse.Namespace(report_dir=str(tmp_path), raw_log=True, slo=["ttft_ms=50"], headless=False,
                                stats_interval=5.0, no_console_table=True, final_report_wait=1.0, **options)  # fmt: skip
    env = Environment(user_classes=[Idle], parsed_options=parsed)
    env.create_local_runner()
    return env


def test_local_run_writes_reports_at_stop_and_quit(tmp_path):
    env = _env(tmp_path)
    collector = install_stats(env)
    env.events.test_start.fire(environment=env)
    collector.add(record(ttft_ms=10))
    collector.add(record(ttft_ms=100))
    env.events.test_stop.fire(environment=env)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["engines"]["e"]["requests"] == 2 and report["manifest"]["role"] == "local"
    assert report["engines"]["e"]["slo"]["good"] == 1  # --slo reached the collector at test_start
    assert len((tmp_path / "requests.jsonl").read_text().splitlines()) == 2  # flushed at stop
    env.events.quitting.fire(environment=env)
    assert env.process_exit_code is None and report["valid"]


def test_stats_path_error_makes_the_exit_code_non_zero(tmp_path):
    env = _env(tmp_path)
    collector = install_stats(env)
    env.events.test_start.fire(environment=env)
    bad = record()
    bad.n_in = "many"  # type: ignore[assignment]
    collector.add(bad)  # does not raise into the user's greenlet
    env.events.test_stop.fire(environment=env)
    env.events.quitting.fire(environment=env)
    assert env.process_exit_code == 3  # run invalid (1 is Locust's "some requests failed")
    assert json.loads((tmp_path / "report.json").read_text())["valid"] is False


def test_test_start_and_reset_button_clear_the_stats(tmp_path):
    env = _env(tmp_path)
    collector = install_stats(env)
    env.events.test_start.fire(environment=env)
    collector.add(record())
    env.events.reset_stats.fire()
    assert collector.report()["engines"] == {}
    collector.add(record())
    env.events.test_start.fire(environment=env)  # a new run from the web UI
    assert collector.report()["engines"] == {}


def test_report_to_master_payload_is_added_by_a_worker_glue(tmp_path):
    from loadkit.locust.statslisteners import LocustStats

    env = _env(tmp_path)
    glue = LocustStats(env)
    glue.runner = type("FakeWorkerRunner", (), {"worker_index": 4})()
    glue.collector.add(record())
    data: dict = {}
    glue._on_report_to_master("client", data)
    assert (
        data[PAYLOAD_KEY]["worker"] == 4 and data[PAYLOAD_KEY]["seq"] == 1 and not data[PAYLOAD_KEY]["final"]
    )


def test_a_worker_snapshot_never_counts_a_request_its_raw_log_lacks(tmp_path):
    """A worker killed right after a snapshot: the master keeps that snapshot, and the file it
    leaves behind must hold every request the snapshot counts (its lines are flushed first)."""
    from loadkit.locust.statslisteners import LocustStats
    from loadkit.stats.rawlog import RawLog

    env = _env(tmp_path)
    glue = LocustStats(env)
    glue.runner = type("FakeWorkerRunner", (), {"worker_index": 1})()
    path = tmp_path / "requests.worker1.jsonl"
    glue.collector.raw_log = RawLog(str(path), truncate=True)
    for _ in range(3):
        glue.collector.add(record())
    assert path.read_bytes() == b""  # buffered: a kill now would lose these lines
    data: dict = {}
    glue._on_report_to_master("client", data)
    counted = sum(sum(g["outcomes"].values()) for *_, g in data[PAYLOAD_KEY]["groups"])
    assert counted == 3 and len(path.read_text().splitlines()) == 3


def _master(tmp_path):
    from loadkit.locust.statslisteners import LocustStats

    env = _env(tmp_path, expect_workers=2)
    env.runner = None
    runner = env.create_master_runner("127.0.0.1", 0)
    glue = LocustStats(env)
    return env, runner, glue


def _close(runner) -> None:
    runner.greenlet.kill(block=True)
    runner.server.close(linger=0)


def test_master_marks_missing_and_silent_workers_lost(tmp_path):
    from locust.runners import STATE_MISSING, WorkerNode

    from loadkit.stats import StatsCollector

    env, runner, glue = _master(tmp_path)
    try:
        worker = StatsCollector()
        worker.add(record())
        for client_id in ("gone", "silent", "done"):
            runner.clients[client_id] = WorkerNode(client_id)
            glue._on_worker_report(
                client_id, {PAYLOAD_KEY: worker.snapshot_payload(final=client_id == "done")}
            )
        runner.clients["gone"].state = STATE_MISSING
        glue._check_workers()
        glue._await_finals()  # "silent" never sends its final within --final-report-wait (1 s)
        nodes = {w["client_id"]: w for w in glue.collector.report()["workers"]["nodes"]}
        assert nodes["gone"]["status"] == "lost" and nodes["gone"]["lost_reason"] == "heartbeat missing"
        assert nodes["silent"]["status"] == "lost" and "no final stats" in nodes["silent"]["lost_reason"]
        assert nodes["done"]["status"] == "final"
        assert glue.collector.report()["engines"]["e"]["requests"] == 3  # every worker's data kept
    finally:
        _close(runner)


def test_master_reset_is_propagated_to_workers_but_not_at_test_start(tmp_path):
    env, runner, glue = _master(tmp_path)
    sent = []
    runner.send_message = lambda msg_type, data=None, client_id=None: sent.append(msg_type)
    try:
        env.events.test_start.fire(environment=env)
        assert sent == []  # workers reset on their own test_start; a message could wipe early records
        env.events.reset_stats.fire()
        assert sent == ["loadkit_reset"]
    finally:
        _close(runner)


def test_each_run_starts_a_fresh_raw_log_in_a_directory_of_its_own(tmp_path):
    given = tmp_path / "r"
    given.mkdir()
    (given / "requests.jsonl").write_text('{"stale": true}\n')  # a previous run in the same directory
    env = _env(given)
    collector = install_stats(env)
    for n in (2, 3):  # two runs in one process (web UI); neither overwrites the earlier one
        env.events.test_start.fire(environment=env)
        collector.add(record())
        env.events.test_stop.fire(environment=env)
        rows = [
            json.loads(line) for line in (tmp_path / f"r-{n}" / "requests.jsonl").read_text().splitlines()
        ]
        assert len(rows) == 1 and "request_id" in rows[0]
        assert json.loads((tmp_path / f"r-{n}" / "report.json").read_text())["manifest"]["report_dir"] == str(
            tmp_path / f"r-{n}"
        )
    assert (given / "requests.jsonl").read_text() == '{"stale": true}\n'  # the earlier run, untouched


def test_installing_the_stats_on_locust_gives_gevents_hub_to_their_live_work(tmp_path):
    # The stats import no event loop (stats/turns.py); the Locust glue installs gevent's hub.
    from loadkit.locust.cooperative import GEVENT_HUB
    from loadkit.stats import turns

    before = turns.set_yield(None)
    try:
        install_stats(_env(tmp_path))
        assert turns.set_yield(before) is GEVENT_HUB
    finally:
        turns.set_yield(before)
