"""The public user API inside one process: which class sends which scenario to which target,
with which budget and tags; the errors that stop a run; a locustfile's shape as stages.

Defining loadkit user classes imports Locust (gevent's monkey patching): this module runs in
the in-process Locust phase (tests/conftest.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from types import SimpleNamespace

import pytest
from locust import FastHttpUser, LoadTestShape, task
from locust.event import Events
from locust.exception import StopUser
from locust.user.task import filter_tasks_by_tags

from loadkit import LLMUser, ScenarioUser
from loadkit.locust.listeners import register
from loadkit.locust.runtime import Runtime
from loadkit.locust.shapesteps import ShapeSteps
from loadkit.run.errors import ConfigError
from loadkit.workload.shipped import SHIPPED_DIR
from tests.helpers.runs import SCENARIOS

CLOSED = str(SCENARIOS / "closed_small.toml")
OPEN = str(SCENARIOS / "open_poisson.toml")
STAGED = str(SCENARIOS / "open_poisson_staged.toml")


def options(**overrides):
    base = dict(engine="openai", api="", model="", api_key="", scenario="", target=["fast=http://127.0.0.1:9",
                "big=http://127.0.0.1:10"], targets="", first_token_timeout=60.0, request_timeout=300.0,
                max_requests=0, max_schedule_lag=0.0, late_threshold_ms=10.0, warmup=0.0, slo=None,
                session_header="", scrape_interval=0)  # fmt: skip
    base.update(overrides)
    return argparse.Namespace(**base)


def runtime_for(*classes, shape=None, shard=(0, 1), **opts) -> Runtime:
    parsed = options(**opts)
    env = SimpleNamespace(user_classes=list(classes), shape_class=shape, parsed_options=parsed)
    runtime = Runtime(env)
    runtime.configure(parsed, None, shard)
    return runtime


class ClosedOnFast(ScenarioUser):
    scenario = CLOSED
    target = "fast"


class OpenEverywhere(ScenarioUser):
    scenario = OPEN


class DefaultScenario(ScenarioUser):
    pass


class Chat(LLMUser):
    target = "big"

    @task
    def ask(self) -> None:
        self.chat("hi")


class Plain(FastHttpUser):
    @task
    def get(self) -> None:
        pass


def test_each_class_gets_its_scenario_its_targets_and_its_schedules():
    rt = runtime_for(ClosedOnFast, OpenEverywhere, Chat, Plain, shard=(1, 2))
    closed, opened = rt.workload_for(ClosedOnFast), rt.workload_for(OpenEverywhere)
    assert (closed.label, opened.label) == ("closed-small", "open-poisson") and len(
        rt.schedules.workloads
    ) == 2
    assert set(closed.sources) == {"fast"} and not closed.dispatchers  # its class names one target
    assert set(opened.sources) == set(opened.dispatchers) == {"fast", "big"}
    assert (
        set(rt.schedules.dispatchers) == {"open-poisson/fast", "open-poisson/big"} and rt.schedules.open_loop
    )
    assert opened.sources["big"].worker_index == 1 and opened.sources["big"].worker_count == 2
    assert [rt.target_for(ClosedOnFast).name for _ in range(3)] == ["fast"] * 3
    assert [rt.target_for(OpenEverywhere).name for _ in range(4)] == ["fast", "big", "fast", "big"]
    assert rt.target_for(Chat).name == "big"
    assert rt.scenario is closed.scenario or rt.scenario is opened.scenario


def test_one_file_named_two_ways_is_one_workload_and_the_default_is_one_like_any_other(tmp_path):
    class ByName(ScenarioUser):
        scenario = "agent-multiturn"

    class ByPath(ScenarioUser):
        scenario = str(SHIPPED_DIR / "agent-multiturn.toml")

    rt = runtime_for(ByName, ByPath, DefaultScenario, scenario=CLOSED)
    assert len(rt.schedules.workloads) == 2
    assert rt.workload_for(ByName) is rt.workload_for(ByPath)
    assert rt.workload_for(DefaultScenario).label == "closed-small"
    assert rt.scenario is rt.workload_for(DefaultScenario).scenario  # --scenario's workload is the main one
    # No locustfile classes at all (the runtime on its own): the one --scenario workload.
    alone = Runtime(None)
    alone.configure(options(scenario=CLOSED, max_requests=0), None, (0, 1))
    assert [w.label for w in alone.schedules.workloads.values()] == ["closed-small"]
    assert set(alone.schedules.dispatchers) == set() and set(alone.schedules.sources) == {"fast", "big"}


def test_budgets_per_scenario_and_for_the_run(tmp_path):
    capped = tmp_path / "capped.toml"
    capped.write_text(
        (SCENARIOS / "closed_small.toml").read_text().replace("duration_s = 60", "max_requests = 7")
    )

    class Capped(ScenarioUser):
        scenario = str(capped)

    rt = runtime_for(Capped, OpenEverywhere, shard=(0, 2))
    work = rt.workload_for(Capped)
    assert work.budget == 4 and rt.workload_for(OpenEverywhere).budget is None and rt.requests.limit is None
    assert [work.take_budget() for _ in range(5)] == [True] * 4 + [False]
    # --max-requests is the run's budget, and then the scenario's own count is not one (the command line wins).
    rt = runtime_for(Capped, max_requests=9, shard=(1, 2))
    assert rt.requests.limit == 4 and rt.workload_for(Capped).budget is None


@pytest.mark.parametrize(
    ("setup", "says"),
    [
        (
            lambda: runtime_for(type("Lost", (LLMUser,), {"target": "nosuch"})),
            "user class Lost: target 'nosuch' is not one of this run's targets (fast, big)",
        ),
        (
            lambda: runtime_for(type("Typo", (ScenarioUser,), {"scenario": "agent-multitrun"})),
            "user class Typo: agent-multitrun: no such file, and no shipped scenario of that name (did you mean 'agent-multiturn'?",
        ),
        (
            lambda: runtime_for(
                ClosedOnFast, type("Other", (ScenarioUser,), {"scenario": "agent-multiturn"})
            ),
            None,
        ),
        (lambda: runtime_for(OpenEverywhere, type("Staged", (ScenarioUser,), {"scenario": STAGED})), None),
        (
            lambda: runtime_for(type("Staged", (ScenarioUser,), {"scenario": STAGED}), shape=Steps()),
            "load shape Steps sets the users over time, and scenario 'open-poisson-staged' has [arrival] stages",
        ),
        (
            lambda: runtime_for(Chat, shape=Steps(), warmup=5.0),
            "--warmup does not combine with the locustfile's load shape",
        ),
    ],
)
def test_what_cannot_run_is_refused_with_one_line_that_says_why(setup, says):
    if says is None:
        setup()  # agrees: different scenarios, no conflicting settings
        return
    with pytest.raises(ConfigError) as info:
        setup()
    assert says in str(info.value) and "\n" not in str(info.value)


def test_scenarios_that_disagree_on_slos_or_stages_name_each_other(tmp_path):
    slow, other_stages = tmp_path / "slow.toml", tmp_path / "stages.toml"
    base = (SCENARIOS / "closed_small.toml").read_text()
    slow.write_text(base.replace('name = "closed-small"', 'name = "slow"') + "\n[slos]\nttft_ms = 900\n")
    fast = tmp_path / "fast.toml"
    fast.write_text(base.replace('name = "closed-small"', 'name = "fast"') + "\n[slos]\nttft_ms = 100\n")
    a = type("A", (ScenarioUser,), {"scenario": str(slow)})
    b = type("B", (ScenarioUser,), {"scenario": str(fast)})
    with pytest.raises(ConfigError, match=r"scenarios 'slow' and 'fast' give different SLOs for ttft_ms"):
        runtime_for(a, b)
    runtime_for(a, b, slo=["ttft_ms=300"])  # the command line decides: no conflict
    other_stages.write_text((SCENARIOS / "open_poisson_staged.toml").read_text().replace("rate = 20", "rate = 30")
                            .replace('name = "open-poisson-staged"', 'name = "other"'))  # fmt: skip
    c = type("C", (ScenarioUser,), {"scenario": STAGED})
    d = type("D", (ScenarioUser,), {"scenario": str(other_stages)})
    with pytest.raises(ConfigError, match=r"'open-poisson-staged' and 'other' both have \[arrival\] stages"):
        runtime_for(c, d)


def test_the_scenario_task_is_tagged_with_the_scenario_and_selected_by_tags():
    class Agents(ScenarioUser):
        scenario = "agent-multiturn"

    class Sub(Agents):
        scenario = "uneven-chat"

    (agents_task,) = Agents.tasks
    assert agents_task.locust_tag_set == {"scenario", "agent-multiturn"}
    (sub_task,) = Sub.tasks  # its own task, not its parent's as well
    assert sub_task.locust_tag_set == {"scenario", "uneven-chat", "uneven_chat"}
    assert LLMUser.tasks == [] and Chat.tasks == [Chat.ask]
    filter_tasks_by_tags(Agents, tags={"agent-multiturn"})
    filter_tasks_by_tags(Sub, tags={"agent-multiturn"})
    assert Agents.tasks == [agents_task] and Sub.tasks == []


def test_listeners_register_once_per_events_object():
    events = Events()
    register(events)
    register(events)
    assert len(events.init._handlers) == 1 and len(events.test_start._handlers) == 1


class Steps(LoadTestShape):
    """5 users, then 10, then 10 users at another spawn rate, then done; on a clock the test moves."""

    now = 0.0

    def get_run_time(self) -> float:
        return self.now

    def tick(self):
        t = self.get_run_time()
        return (5, 5) if t < 10 else (10, 5) if t < 20 else (10, 2) if t < 25 else None


def test_a_shape_s_steps_become_the_stages_and_label_every_request():
    shape = Steps()
    parsed = options()
    env = SimpleNamespace(user_classes=[Chat], shape_class=shape, parsed_options=parsed)
    steps = ShapeSteps(env, shape)
    shape.reset_time()
    seen = []
    for t in (0.0, 1.0, 9.5, 10.2, 15.0, 20.4, 24.0):
        shape.now = t
        shape.tick()
        seen.append(steps.current)
    assert seen == ["step1", "step1", "step1", "step2", "step2", "step3", "step3"]
    runtime = Runtime(env)
    runtime.schedules.shape_steps = steps
    runtime.configure(parsed, None, (0, 1))
    assert (
        runtime.schedules.plan is steps.plan
        and runtime.schedules.staged
        and runtime.schedules.stage_now() == "step3"
    )
    assert runtime.schedules.slot_stage("main") is None  # open-loop slots take the shape's step at send
    shape.now = 26.0
    assert shape.tick() is None
    steps.finish()
    assert [(s["name"], s["level"], s["spawn_rate"], s["start_s"], s["duration_s"]) for s in steps.plan] == [
        ("step1", 5, 5.0, 0.0, 10.2), ("step2", 10, 5.0, 10.2, 10.2), ("step3", 10, 2.0, 20.4, 5.6)]  # fmt: skip
    assert steps.manifest()["class"] == "Steps"
    shape.reset_time()  # a new run of the shape starts over
    assert steps.plan == [] and steps.current is None


def test_importing_loadkit_does_not_import_locust():
    code = ("import sys, loadkit; assert 'locust' not in sys.modules and 'gevent' not in sys.modules; "
            "from loadkit import LLMUser; assert 'locust' in sys.modules")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_scenario_option_no_class_uses_is_said(caplog):
    with caplog.at_level("WARNING", logger="loadkit"):
        runtime_for(ClosedOnFast, Chat, scenario=OPEN)
    assert f"--scenario {OPEN} is not used: no ScenarioUser class" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="loadkit"):
        runtime_for(DefaultScenario, scenario=OPEN)
    assert "is not used" not in caplog.text


@pytest.mark.parametrize(("raised", "reason"), [(ValueError("parse failed"), "task_error"),
                                                (StopUser(), "cancelled")])  # fmt: skip
def test_a_scenario_session_left_by_an_exception_says_whether_the_task_raised_or_was_stopped(raised, reason):
    from loadkit.records import RequestRecord
    from loadkit.types import GenerationRequest
    from loadkit.workload.sessions import TraceSession

    class Sender:
        """ScenarioUser.run_session's only needs: turn 1 ok, then the exception at turn 2's send."""

        ended: list = []

        def _send_counted(self, request, budgeted):
            if request.turn == 2:
                raise raised
            return RequestRecord(request_id="r1", engine="fast", adapter="openai", outcome="ok", text="reply")

        def _session_ended(self, session):
            self.ended.append(session)

    session = TraceSession(
        "S-1", lambda i: GenerationRequest(prompt="p", turn=i + 1, session_id="S-1"), [0.0, 0.0]
    )
    sender = Sender()
    with pytest.raises(type(raised)):
        ScenarioUser.run_session(sender, session)  # type: ignore[arg-type]
    assert sender.ended == [session] and (session.status, session.broken_reason) == ("broken", reason)
