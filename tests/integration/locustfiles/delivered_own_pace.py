"""An LLMUser whose own task and wait_time pace it: loadkit cannot know what it asked."""

from locust import constant_pacing, task

from loadkit import LLMUser


class Paced(LLMUser):
    wait_time = constant_pacing(0.25)

    @task
    def ask(self) -> None:
        self.chat("How fast do I ask?", max_tokens=8, label="paced")
