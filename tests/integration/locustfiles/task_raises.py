"""A locustfile whose task raises after one ok turn of its session (issue #32, item 1).

Every episode sends turn 1, then the task's own code fails on the reply: a ValueError on odd
episodes of this process, a KeyError on even ones. Turn 2 is never sent. Nothing about the
requests fails, so only loadkit's ``task_errors``, the session ends and the exit line can show it.
"""

from itertools import count

from locust import task

from loadkit import LLMUser

EPISODES = count(1)


class Breaks(LLMUser):
    @task
    def episode(self) -> None:
        with self.session(name="agent") as conv:
            rec = conv.chat("plan the trip", max_tokens=8)
            if not rec.ok:
                return
            if next(EPISODES) % 2:
                raise ValueError("the reply named no tool")
            tool = {"text": rec.text}["tool"]  # a KeyError: a parse of the reply that went wrong
            conv.chat(f"ran {tool}", max_tokens=8)  # never reached
