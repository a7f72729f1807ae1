"""loadkit's locustfile: `locust -f locustfiles/llm.py --host URL --engine openai --scenario NAME|FILE`."""

from locust import events

from loadkit.glue.listeners import register
from loadkit.glue.user import LLMUser

register(events)


class LLM(LLMUser):
    """One virtual user streaming the scenario's traffic to one target."""
