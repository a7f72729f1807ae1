"""A shape and a scenario with stages of its own: cannot both drive the run."""

from locust import LoadTestShape

from loadkit import ScenarioUser


class Staged(ScenarioUser):
    pass  # --scenario (a staged one, in the test)


class Ramp(LoadTestShape):
    def tick(self):
        return (2, 2) if self.get_run_time() < 5 else None
