"""Two scenario classes, each with its own scenario and target, and their own weights."""

from pathlib import Path

from loadkit import ScenarioUser

HERE = Path(__file__).resolve().parent.parent / "scenarios"


class Scheduled(ScenarioUser):
    """Open loop: Poisson at 20 req/s to target `fast`."""

    weight = 1
    scenario = str(HERE / "open_poisson.toml")
    target = "fast"


class BackToBack(ScenarioUser):
    """Closed loop (relative path, found beside this locustfile's scenarios) to target `big`;
    exactly two users of it, whatever -u."""

    fixed_count = 2
    scenario = "../scenarios/closed_small.toml"
    target = "big"
