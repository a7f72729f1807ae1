"""Did two runs send the same prompts? Then the later one may have been answered from the
server's prefix cache (a back-to-back rerun on a real server: TTFT p50 24.8 → 11.2 ms), and an
A/B comparison of the two measures the cache, not the change (issue 32).

A run's prompt texts are fixed by its scenario file, the scenario's seed and the run's prompt
salt (manifest ``prompts.salt``; reports written before loadkit salted prompts have none and
were unsalted, like ``--seed 0``). Equal all three: the same prompts.
"""

from __future__ import annotations

from typing import Any


def _fixed_by(report: dict[str, Any]) -> tuple[Any, Any, int] | None:
    manifest = report.get("manifest") or {}
    scenario = manifest.get("scenario") or {}
    if not isinstance(scenario, dict) or not scenario.get("sha256"):
        return None  # no scenario recorded (a locustfile's own prompts): nothing to say
    prompts = manifest.get("prompts") or {}
    salt = prompts.get("salt") if isinstance(prompts, dict) else None
    return scenario.get("sha256"), scenario.get("seed"), int(salt or 0)


def same_prompts_warning(
    base: dict[str, Any], other: dict[str, Any], base_name: str, other_name: str
) -> str | None:
    """One line when the two reports sent the same prompts, else None."""
    a, b = _fixed_by(base), _fixed_by(other)
    if a is None or a != b:
        return None
    _, seed, salt = a
    how = f"prompt salt {salt}" if salt else "no prompt salt"
    return (
        f"{other_name} sent the same prompts as {base_name} (same scenario, seed {seed}, {how}): a server with "
        "a prefix cache may have answered the later run from it; for an A/B comparison rerun without --seed"
    )
