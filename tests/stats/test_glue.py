"""The Locust glue inside one process: events in, report files and exit code out."""

from __future__ import annotations

import argparse
import json

from locust import User, task
from locust.env import Environment

from loadkit.stats import install_stats
from loadkit.stats.distributed import PAYLOAD_KEY
from tests.stats.records import record


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
    assert env.process_exit_code == 1
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
    from loadkit.stats.locust_glue import LocustStats

    env = _env(tmp_path)
    glue = LocustStats(env)
    glue.runner = type("FakeWorkerRunner", (), {"worker_index": 4})()
    glue.collector.add(record())
    data: dict = {}
    glue._on_report_to_master("client", data)
    assert (
        data[PAYLOAD_KEY]["worker"] == 4 and data[PAYLOAD_KEY]["seq"] == 1 and not data[PAYLOAD_KEY]["final"]
    )
