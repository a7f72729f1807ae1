"""A locustfile's own LoadTestShape, watched: each step of the shape is a stage of the report.

Locust calls the shape's ``tick()`` about once a second on the node that runs it (local or
master). Every time the tick's value changes, a step begins: ``step1``, ``step2``, ... with
its user count, spawn rate and (when the shape names them) user classes. The step's name is
``ShapeSteps.current`` here, and the master sends it to every worker (``SHAPE_STAGE_MESSAGE``,
ahead of the spawn messages of the step), so requests are labelled with the step they were
sent in on every node. The steps, with their measured durations, are the stage table's plan and go into
the manifest (``manifest.shape``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadkit.locust.shape import StageShape

SHAPE_STAGE_MESSAGE = "loadkit_shape_stage"  # master → workers: {"v": 1, "stage": name or None}


def user_shape(environment: Any) -> Any:
    """The locustfile's load shape (an instance), or None (none, or loadkit's own stage shape)."""
    shape = getattr(environment, "shape_class", None)
    return None if shape is None or isinstance(shape, StageShape) else shape


class ShapeSteps:
    """Wraps one shape instance's ``tick`` and ``reset_time``; see the module docstring."""

    def __init__(self, environment: Any, shape: Any) -> None:
        self.environment = environment
        self.shape = shape
        self.plan: list[dict[str, Any]] = []  # shared with the stage stats: updated in place
        self.current: str | None = None  # the step the run is in
        # Told the plan whenever a step begins or the steps start over (locust/runtime.py).
        self.on_plan: Callable[[list[dict[str, Any]]], None] | None = None
        self._last: Any = None
        self._running = False  # from the first tick of a run to its finish()
        self._tick, self._reset = shape.tick, shape.reset_time
        shape.tick, shape.reset_time = self.tick, self.reset_time

    def reset_time(self) -> None:
        """A new run of the shape: the steps start over. Locust calls this when it starts the
        shape and again once its first step has started the run (after test_start): that
        second call must not forget the step already sent to the workers."""
        self._reset()
        if self._running:
            return
        self.plan.clear()
        self._last = None
        self._set_stage(None)
        self._plan_changed()

    def tick(self) -> Any:
        value = self._tick()
        self._running = True
        elapsed = float(self.shape.get_run_time())
        if self.plan:
            self.plan[-1]["duration_s"] = round(elapsed - self.plan[-1]["start_s"], 3)
        if value is not None and value != self._last:
            self._last = value
            self._begin(value, elapsed)
        return value

    def _begin(self, value: Any, elapsed: float) -> None:
        name = f"step{len(self.plan) + 1}"
        step: dict[str, Any] = {"name": name, "level": int(value[0]), "level_kind": "users", "duration_s": 0.0,
                                "start_s": round(elapsed, 3), "spawn_rate": float(value[1])}  # fmt: skip
        if len(value) > 2 and value[2]:
            step["user_classes"] = sorted(getattr(c, "__name__", str(c)) for c in value[2])
        self.plan.append(step)
        self._set_stage(name)
        self._plan_changed()

    def _plan_changed(self) -> None:
        if self.on_plan is not None:
            self.on_plan(self.plan)

    def finish(self) -> None:
        """The run stopped: the last step lasted until now."""
        self._running = False
        if self.plan:
            self.plan[-1]["duration_s"] = round(
                float(self.shape.get_run_time()) - self.plan[-1]["start_s"], 3
            )

    def _set_stage(self, name: str | None) -> None:
        from locust.runners import MasterRunner

        self.current = name
        runner = getattr(self.environment, "runner", None)
        if isinstance(runner, MasterRunner):
            runner.send_message(SHAPE_STAGE_MESSAGE, {"v": 1, "stage": name})

    def manifest(self) -> dict[str, Any]:
        return {"class": type(self.shape).__name__, "steps": [dict(s) for s in self.plan]}


def watch_shape(environment: Any, shape: Any = None) -> ShapeSteps | None:
    """Watch ``shape`` (default: the environment's own, if it is the locustfile's) once per
    shape instance; None when there is no such shape."""
    shape = shape if shape is not None else user_shape(environment)
    if shape is None or isinstance(shape, StageShape):
        return None
    steps = getattr(shape, "loadkit_steps", None)
    if steps is None:
        steps = ShapeSteps(environment, shape)
        shape.loadkit_steps = steps
    return steps


def install_worker(environment: Any, runtime: Any) -> None:
    """Worker: the master's current shape step labels this worker's requests."""

    def on_stage(msg: Any, **_: Any) -> None:
        data = msg.data if isinstance(msg.data, dict) else {}
        runtime.schedules.shape_stage = data.get("stage") if data.get("v") == 1 else None

    environment.runner.register_message(SHAPE_STAGE_MESSAGE, on_stage)
