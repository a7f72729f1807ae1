"""Thin locustfile: all logic lives in loadkit.locust (importable and tested on its own)."""

from loadkit.locust.locustfile import LLM  # noqa: F401  (Locust collects User classes by name)
