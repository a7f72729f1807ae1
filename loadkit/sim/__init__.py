"""The embedded engine simulator: a continuous-batching server speaking each engine's wire protocol.

Run it with ``loadkit sim``; from tests use :mod:`loadkit.sim.testing`. See docs/simulator.md.
"""

from loadkit.sim.config import PROFILES, ConfigError, Profile

__all__ = ["PROFILES", "ConfigError", "Profile"]
