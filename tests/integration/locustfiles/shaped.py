"""A locustfile's own LoadTestShape over an LLMUser and a ScenarioUser: 2, then 4, then 6 users."""

from locust import LoadTestShape, task

from loadkit import LLMUser, ScenarioUser


class Ask(LLMUser):
    @task
    def ask(self) -> None:
        self.chat("How many steps does this shape have?", max_tokens=16, label="ask")


class Scenario(ScenarioUser):
    pass  # --scenario


class ThreeSteps(LoadTestShape):
    def tick(self):
        t = self.get_run_time()
        return (2, 10) if t < 3 else (4, 10) if t < 6 else (6, 10) if t < 9 else None
