"""Stages as a Locust load shape: the user count per stage of a closed-loop sweep, or a fixed
pool of senders for an open-loop schedule whose rate changes by stage. The run ends after the
last stage. Installed at `init` only when the scenario has stages (or a warm-up)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from locust import LoadTestShape

from loadkit.run.stageplan import stage_duration


class StageShape(LoadTestShape):
    """tick() → (users, spawn rate) for the stage the run is in; None after the last stage."""

    use_common_options = True  # -u is the open-loop sender pool and the closed-loop default

    def __init__(self, plan: list[dict[str, Any]], closed: bool, config: Callable[[], Any] = lambda: None,
                 on_start: Callable[[], None] = lambda: None) -> None:  # fmt: skip
        super().__init__()
        self.plan = plan
        self.closed = closed
        # The run's configuration as it is now (run/runconfig.py RunConfig; None: none): its
        # launch facts give -u (the web form sets it at each start), its run time the -t limit.
        self.config = config
        self.on_start = on_start  # told when Locust starts the shape, before its first tick

    def reset_time(self) -> None:
        super().reset_time()
        self.on_start()

    def users_for(self, stage: dict[str, Any]) -> int:
        config = self.config() if self.runner else None
        default = int((config.launch.num_users if config is not None else None) or 1) if self.runner else 1
        if self.closed and stage.get("level") is not None:
            return int(stage["level"])
        return default

    def tick(self) -> tuple[int, float] | None:
        elapsed = self.get_run_time()
        # Locust only applies -t after a shape ends; a given -t still bounds the run.
        config = self.config() if self.runner else None
        limit = config.run_time_s if config is not None else None
        if limit and elapsed >= float(limit):
            return None
        start = 0.0
        for stage in self.plan:
            start += stage_duration(stage)
            if elapsed < start:
                users = self.users_for(stage)
                # Reach each level at once: a sweep level is measured at its full load.
                return users, float(max(users, 1) * 10)
        return None
