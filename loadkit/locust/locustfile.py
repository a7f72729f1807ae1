"""loadkit's locustfile: `locust -f locustfiles/llm.py --host URL --engine openai --scenario NAME|FILE`.

Defining the user class is the whole wiring: loadkit's listeners join Locust's events then."""

from loadkit.locust.scenario_user import ScenarioUser


class LLM(ScenarioUser):
    """One virtual user streaming the scenario (--scenario) to the run's targets in turn."""
