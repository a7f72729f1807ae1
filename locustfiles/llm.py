"""Thin locustfile: all logic lives in loadkit.glue (importable and tested on its own)."""

from loadkit.glue.locustfile import LLM  # noqa: F401  (Locust collects User classes by name)
