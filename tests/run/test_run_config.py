"""The run configuration: precedence (web form > command line > scenario > defaults), a web
form's SLOs kept over the scenario's, the options left alone, the worker wire form.

Runtime imports Locust: the tests that build one are in the in-process Locust phase."""

from __future__ import annotations

import argparse
import dataclasses
from types import SimpleNamespace

import pytest

from loadkit.run.errors import ConfigError
from loadkit.run.runconfig import COMMAND_LINE, FORM, SCENARIO, RunConfig, StartPlan
from tests.helpers.runs import SCENARIOS


def options(**overrides):
    base = dict(engine="openai", api="", model="", api_key="", scenario="", target=["fast=http://127.0.0.1:9"],
                targets="", first_token_timeout=60.0, request_timeout=300.0, max_requests=0,
                max_schedule_lag=0.0, late_threshold_ms=10.0, warmup=0.0, slo=None, session_header="",
                scrape_interval=0, run_time=None, headless=True)  # fmt: skip
    base.update(overrides)
    return argparse.Namespace(**base)


@pytest.fixture
def with_slos(tmp_path):
    path = tmp_path / "slos.toml"
    path.write_text((SCENARIOS / "closed_small.toml").read_text() + "\n[slos]\nttft_ms = 700\ntpot_ms = 40\n")
    return str(path)


def runtime_on(parsed):
    """A runtime whose command line was ``parsed`` (Locust's web form changes it later)."""
    from loadkit.locust.runtime import Runtime
    from loadkit.run.runconfig import snapshot

    env = SimpleNamespace(user_classes=None, shape_class=None, parsed_options=parsed)
    return Runtime(env, command_line=snapshot(parsed))


def configure(runtime, parsed):
    before = dict(vars(parsed))
    config = runtime.configure(parsed, None, (0, 1))
    assert vars(parsed) == before  # set-up only reads the options
    return config


@pytest.mark.in_process_locust
def test_slos_web_form_over_command_line_over_scenario_over_none(with_slos):
    parsed = options(scenario=with_slos)
    runtime = runtime_on(parsed)
    config = configure(runtime, parsed)
    assert (config.slos, config.slo_source) == (("ttft_ms=700", "tpot_ms=40"), SCENARIO)
    assert config.slo_limits() == {"ttft_ms": 700.0, "tpot_ms": 40.0}
    parsed = options(scenario=with_slos, slo=["ttft_ms=300"])
    runtime = runtime_on(parsed)
    assert (configure(runtime, parsed).slos, runtime.config.slo_source) == (("ttft_ms=300",), COMMAND_LINE)
    parsed.slo = "ttft_ms=250,tpot_ms=20"  # what Locust's /swarm writes from the form
    assert (configure(runtime, parsed).slos, runtime.config.slo_source) == (("ttft_ms=250,tpot_ms=20",), FORM)
    assert runtime.config.slo_limits() == {"ttft_ms": 250.0, "tpot_ms": 20.0}
    parsed = options(scenario=str(SCENARIOS / "closed_small.toml"))
    assert (configure(runtime_on(parsed), parsed).slos, runtime_on(parsed).config.slo_source) == ((), None)


@pytest.mark.in_process_locust
def test_slos_typed_in_the_form_are_kept_after_a_run_whose_slos_came_from_the_scenario(with_slos):
    """Bug: run 1 took the scenario's SLOs (written into the options, marked); run 2's typed
    SLOs were then replaced by the scenario's. Goodput was judged against limits nobody asked."""
    parsed = options(scenario=with_slos)
    runtime = runtime_on(parsed)
    assert configure(runtime, parsed).slo_source == SCENARIO
    parsed.slo = ["ttft_ms=999"]  # run 2: typed into the web form
    config = configure(runtime, parsed)
    assert (config.slos, config.slo_source, config.slo_limits()) == (
        ("ttft_ms=999",),
        FORM,
        {"ttft_ms": 999.0},
    )
    parsed.slo = []  # run 3: the form's field emptied again: the scenario's count once more
    assert configure(runtime, parsed).slo_source == SCENARIO


@pytest.mark.in_process_locust
def test_run_time_web_form_over_command_line_over_scenario_duration(with_slos):
    parsed = options(scenario=with_slos)  # headless, no -t: the scenario's duration_s = 60 bounds it
    runtime = runtime_on(parsed)
    assert (configure(runtime, parsed).run_time_s, runtime.config.run_time_source) == (60.0, SCENARIO)
    parsed = options(scenario=with_slos, run_time=20)
    runtime = runtime_on(parsed)
    assert (configure(runtime, parsed).run_time_s, runtime.config.run_time_source) == (20.0, COMMAND_LINE)
    parsed.run_time = 9
    assert (configure(runtime, parsed).run_time_s, runtime.config.run_time_source) == (9.0, FORM)
    parsed = options(scenario=with_slos, headless=False)  # the web UI: no duration unless asked
    assert configure(runtime_on(parsed), parsed).run_time_s is None


@pytest.mark.in_process_locust
def test_a_warm_up_with_no_stages_is_followed_by_the_measured_rest_of_the_run_time():
    parsed = options(scenario=str(SCENARIOS / "closed_small.toml"), warmup=3.0, run_time=15)
    runtime = runtime_on(parsed)
    configure(runtime, parsed)
    assert [(s["name"], s["duration_s"]) for s in runtime.schedules.plan] == [("warmup", 3.0), ("main", 12.0)]
    parsed = options(scenario=str(SCENARIOS / "closed_small.toml"), warmup=3.0)  # no -t: duration_s
    runtime = runtime_on(parsed)
    configure(runtime, parsed)
    assert [(s["name"], s["duration_s"]) for s in runtime.schedules.plan] == [("warmup", 3.0), ("main", 60.0)]
    assert runtime.config.run_time_s is None  # the stage plan ends the run
    parsed = options(scenario=str(SCENARIOS / "closed_small.toml"), warmup=3.0, run_time=3)
    with pytest.raises(ConfigError, match=r"--warmup 3 leaves nothing to measure in -t 3s"):
        runtime_on(parsed).configure(parsed, None, (0, 1))


def test_the_worker_wire_form_is_versioned_and_round_trips():
    config = RunConfig(slos=("ttft_ms=500",), slo_source=FORM, max_requests=40, run_time_s=12.0,
                       run_time_source=COMMAND_LINE, warmup_s=2.0, plugins={"loadkit": "1"},
                       salt=12345, salt_source="random")  # fmt: skip
    plan = StartPlan(detections={"http://x": {"engine": "vllm"}}, preflight={"t": {"drop": ["ignore_eos"]}},
                     report_dir="reports/run-2")  # fmt: skip
    wire = config.to_wire(plan, (1, 3))
    assert wire["v"] == 2
    back, back_plan = RunConfig.from_wire(wire)
    assert back == config and back_plan == plan.with_(shard=(1, 3))
    assert RunConfig.from_wire(config.to_wire(plan, None))[1].late
    # A version-1 master (no report directory, no salt) is refused, not half understood.
    with pytest.raises(ConfigError, match=r"version 1; this worker understands version 2"):
        RunConfig.from_wire({**wire, "v": 1})
    with pytest.raises(ConfigError, match=r"version None"):
        RunConfig.from_wire({"slos": []})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.slos = ()  # type: ignore[misc]


@pytest.mark.in_process_locust
def test_each_start_salts_its_prompts_unless_seed_is_given_and_a_worker_takes_the_masters_salt():
    from loadkit.run.runconfig import parse_seed

    parsed = options(scenario=str(SCENARIOS / "closed_small.toml"), seed="")
    runtime = runtime_on(parsed)
    salts = {configure(runtime, parsed).salt for _ in range(3)}
    assert len(salts) == 3 and 0 not in salts and runtime.config.salt_source == "random"
    source = next(iter(runtime.schedules.workloads.values())).sources["fast"]
    assert source.salt == runtime.config.salt  # what the sources draw prompt words with
    given = options(scenario=str(SCENARIOS / "closed_small.toml"), seed=41)
    config = configure(runtime_on(given), given)
    assert (config.salt, config.salt_source) == (41, f"--seed ({COMMAND_LINE})")
    form = options(scenario=str(SCENARIOS / "closed_small.toml"), seed="0")  # typed into the web form
    form_runtime = runtime_on(options(scenario=str(SCENARIOS / "closed_small.toml"), seed=""))
    assert configure(form_runtime, form).salt == 0  # 0: the scenario's own prompts
    assert form_runtime.config.salt_source == f"--seed ({FORM})"
    # A worker uses the master's salt, whatever its own options say.
    worker = runtime_on(parsed)
    worker.configure(
        parsed,
        None,
        (1, 2),
        (RunConfig(salt=1234, salt_source="random", plugins=worker.fingerprint()), StartPlan()),
    )
    assert worker.config.salt == 1234
    assert {s.salt for w in worker.schedules.workloads.values() for s in w.sources.values()} == {1234}
    assert parse_seed(" 7 ") == 7 and parse_seed(None) is None and parse_seed("") is None
    with pytest.raises(ConfigError, match=r"--seed: 'x' is not a whole number"):
        parse_seed("x")


def test_the_config_holds_targets_scenario_seed_plugin_options_and_launch_facts():
    from loadkit.run.settings import LaunchFacts, TargetSettings, parse_settings

    parsed = options(api_key="sk-1", model="m", targets="b=http://127.0.0.1:8", seed="7", num_users=3,
                     spawn_rate=2.0, model_config="Qwen/Qwen2-0.5B", report_format=["llmd-br", "llmd-br"],
                     web_host="127.0.0.1", scenario="x.toml")  # fmt: skip
    settings = parse_settings(parsed, ())
    assert settings.targets == TargetSettings(("fast=http://127.0.0.1:9", "b=http://127.0.0.1:8"), "openai",
                                              None, "sk-1", "m")  # fmt: skip
    assert "sk-1" not in repr(settings)  # the API key never shows in a repr
    assert (settings.scenario, settings.seed, settings.plugin_options["model"]) == ("x.toml", 7, "m")
    assert settings.launch == LaunchFacts(3, 2.0, "Qwen/Qwen2-0.5B", ("llmd-br",), "127.0.0.1")
    with pytest.raises(TypeError):
        settings.plugin_options["model"] = "other"  # type: ignore[index]


@pytest.mark.in_process_locust
def test_launch_facts_locust_sets_after_the_configuration_was_made_are_taken_at_the_start():
    from loadkit.locust.starts import prepare
    from loadkit.run.settings import LaunchFacts

    parsed = options(num_users=None, spawn_rate=None)
    runtime = runtime_on(parsed)
    config = prepare(runtime, parsed, None, (0, 1))
    assert runtime.configured == 1 and config.launch.num_users is None
    assert config.with_launch(config.launch) is config
    parsed.num_users, parsed.spawn_rate = 1, 1.0  # what Locust fills in for a headless run
    again = prepare(runtime, parsed, None, (0, 1))
    assert runtime.configured == 1 and again.launch == LaunchFacts(1, 1.0)
    assert dataclasses.replace(again, settings=config.settings) == config  # nothing else changed


@pytest.mark.in_process_locust
def test_the_stage_shape_takes_users_and_run_time_from_the_configuration():
    from loadkit.locust.shape import StageShape
    from loadkit.run.settings import LaunchFacts

    config = RunConfig(run_time_s=5.0).with_launch(LaunchFacts(num_users=7))
    started = []
    shape = StageShape([{"name": "s", "level": None, "duration_s": 10.0}], closed=True, config=lambda: config,
                       on_start=lambda: started.append(True))  # fmt: skip
    shape.runner = SimpleNamespace()
    shape.reset_time()
    assert started == [True] and shape.users_for({"level": None}) == 7 and shape.tick() == (7, 70.0)
    shape.start_time -= 6.0  # past -t
    assert shape.tick() is None
