"""Deprecated: moved to ``loadkit.locust.scenario_user`` in loadkit 0.3.0. Kept here, re-exporting its public names
with a ``DeprecationWarning``, until 0.4.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.locust.scenario_user import ScenarioUser

__all__ = ["ScenarioUser"]

warn_moved(__name__, "loadkit.locust.scenario_user", removed_in="0.4.0")
