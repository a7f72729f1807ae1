"""The built-ins' recorded streams, replayed with loadkit.testing.replay (shipped for plugins)."""

from __future__ import annotations

from pathlib import Path

from loadkit.testing.replay import Replay, fixture_body, replay

FIXTURES = Path(__file__).resolve().parents[1] / "engines" / "fixtures"
__all__ = ["FIXTURES", "Replay", "body_bytes", "replay"]


def body_bytes(name: str) -> bytes:
    """A fixture's stream body: notes (``#`` lines) and a captured HTTP head removed."""
    return fixture_body(FIXTURES / name)
