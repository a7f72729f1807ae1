"""Two scenario classes on two targets: closed-loop agent-multiturn on `agent`, Poisson
uneven_chat (4 req/s) on `chat`. Each target's delivered load is judged by its own class."""

from loadkit import ScenarioUser


class Agent(ScenarioUser):
    fixed_count = 2
    scenario = "agent-multiturn"
    target = "agent"


class Chat(ScenarioUser):
    fixed_count = 4
    scenario = "uneven_chat"
    target = "chat"
