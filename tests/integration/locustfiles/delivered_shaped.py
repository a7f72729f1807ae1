"""Closed-loop agent-multiturn on `agent` and Poisson uneven_chat on `chat` under a
LoadTestShape of two steps of constant users (2 then 4 per class)."""

from locust import LoadTestShape

from loadkit import ScenarioUser


class Agent(ScenarioUser):
    scenario = "agent-multiturn"
    target = "agent"


class Chat(ScenarioUser):
    scenario = "uneven_chat"
    target = "chat"


class TwoSteps(LoadTestShape):
    def tick(self):
        t = self.get_run_time()
        return (4, 20) if t < 4 else (8, 20) if t < 8 else None
