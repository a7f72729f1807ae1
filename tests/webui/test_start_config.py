"""Starts from the web UI's form in a real Locust environment with loadkit's listeners: the
SLOs typed into the form are the ones the stats judge, also after a run whose SLOs came from
the scenario (issue 22), and the form leaves the command line's values for the next start."""

from __future__ import annotations

import time

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS

pytestmark = pytest.mark.in_process_locust


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    monkeypatch.setattr("sys.argv", ["locust"])  # Locust's index page re-parses sys.argv


def loadkit_web_env(tmp_path, scenario: str):
    from locust.argument_parser import get_parser
    from locust.env import Environment
    from locust.event import Events

    from loadkit import ScenarioUser
    from loadkit.locust.listeners import register
    from loadkit.run.options import add_arguments

    class FormUser(ScenarioUser):
        pass

    events = Events()
    register(events)
    parser = get_parser()
    if not any("--engine" in action.option_strings for action in parser._actions):
        add_arguments(parser)
    options = parser.parse_args(args=["--report-dir", str(tmp_path), "--scenario", scenario,
                                      "--engine", "openai", "--stop-timeout", "1"])  # fmt: skip
    env = Environment(user_classes=[FormUser], events=events, parsed_options=options)
    env.create_local_runner()
    env.create_web_ui("127.0.0.1", 0, delayed_start=True)
    events.init.fire(environment=env, runner=env.runner, web_ui=env.web_ui)
    return env


def wait_for(env, states: tuple[str, ...], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while env.runner.state not in states:
        assert time.monotonic() < deadline, f"runner stayed {env.runner.state}, wanted {states}"
        time.sleep(0.02)


def start_and_stop(env, client, form: dict[str, str]) -> None:
    """One run from the form: started (test_start fired), then stopped."""
    body = client.post("/swarm", data=form).get_json()
    assert body["success"], body
    wait_for(env, ("running",))
    assert client.post("/stop").get_json()["success"]
    wait_for(env, ("stopped",))


def test_slos_typed_in_the_form_are_judged_after_a_run_with_the_scenarios(tmp_path):
    scenario = tmp_path / "slos.toml"
    scenario.write_text((SCENARIOS / "tiny_fixed.toml").read_text() + "\n[slos]\nttft_ms = 700\n")
    with sim_process("--profile", "fast") as sim:
        env = loadkit_web_env(tmp_path, str(scenario))
        before = dict(vars(env.parsed_options))
        client = env.web_ui.app.test_client()
        form = {"user_count": "1", "spawn_rate": "1", "host": sim.url, "scenario": str(scenario), "slo": ""}
        start_and_stop(env, client, form)
        collector = env.loadkit.stats
        assert [(s.key, s.limit_ms) for s in collector.slos] == [("ttft_ms", 700.0)]
        assert env.loadkit.config.slo_source == "scenario"
        assert env.parsed_options.slo in (None, [], [""], "")  # the scenario's are not written back
        start_and_stop(env, client, {**form, "slo": "ttft_ms=999"})
        assert [(s.key, s.limit_ms) for s in collector.slos] == [("ttft_ms", 999.0)]
        assert env.loadkit.config.slo_source == "web form"
        changed = {k for k, v in vars(env.parsed_options).items() if before.get(k) != v}
        assert changed <= {"slo", "host", "num_users", "spawn_rate", "scenario", "run_time", "user_classes"}
        env.runner.quit()
