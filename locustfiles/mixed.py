"""Mixed traffic: chat users, agent sessions from a shipped scenario, and a plain HTTP user.

    locust -f locustfiles/mixed.py --headless -u 10 -t 2m --host http://127.0.0.1:8000 --engine vllm \
        --report-dir reports/mixed --raw-log

Three Locust user classes share one run, weighted as Locust weights any users (3 : 1 : 1):

- ``Chat`` writes its own requests: short questions and the odd long paste, labelled apart;
- ``Agent`` sends the shipped ``agent-multiturn`` scenario (multi-turn sessions with tool
  calls, think times, shared system prompts), exactly as ``locustfiles/llm.py`` would;
- ``Models`` is an ordinary Locust ``FastHttpUser`` polling ``/v1/models`` once a second, the
  kind of background traffic a gateway sees. loadkit leaves it alone: it shows in Locust's
  own table, not in loadkit's LLM stats.

loadkit's report has the requests per engine and label as usual, and per user class
(``user_classes``: Chat, Agent) — in report.json, report.html and the web UI's LLM tab.

Tags select tasks as in any locustfile; the agent's scenario task is tagged ``scenario`` and
``agent-multiturn``: ``locust -f locustfiles/mixed.py Agent Chat --tags agent-multiturn short``
runs the agent sessions and the short questions only (a class left without tasks cannot run,
so the classes to run are named too).
"""

import random

from locust import FastHttpUser, between, constant, tag, task

from loadkit import LLMUser, ScenarioUser

TOPICS = ("the weather", "a recipe for bread", "the French revolution", "unit testing", "tide tables",
          "a birthday poem", "the rules of chess", "how vaccines work")  # fmt: skip
PASTE = " ".join(
    f"Line {i}: the quarterly figures rose by {i % 7} percent in region {i % 5}." for i in range(120)
)


class Chat(LLMUser):
    """A person chatting: mostly short questions, sometimes a long pasted document."""

    weight = 3
    wait_time = between(0.2, 1.0)

    @tag("chat", "short")
    @task(4)
    def short_question(self) -> None:
        topic = random.choice(TOPICS)
        self.chat(f"Tell me briefly about {topic}.", max_tokens=random.randint(16, 64), label="chat:short")

    @tag("chat", "long")
    @task(1)
    def long_paste(self) -> None:
        messages = [{"role": "user", "content": f"Summarise this report:\n{PASTE}"}]
        self.chat(messages, max_tokens=96, label="chat:long")


class Agent(ScenarioUser):
    """Agent sessions from a shipped scenario; its tag is the scenario's name (--tags agent-multiturn)."""

    weight = 1
    scenario = "agent-multiturn"


class Models(FastHttpUser):
    """Not an LLM user: a plain HTTP client polling the model list."""

    weight = 1
    wait_time = constant(1)

    @task
    def list_models(self) -> None:
        self.client.get("/v1/models")
