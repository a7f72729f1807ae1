"""Test locustfile for the browser tests: exactly loadkit's own locustfile (whose `init`
listener installs the LLM view), so the tests exercise what users run."""

from loadkit.locust.locustfile import LLM  # noqa: F401  (Locust collects User classes by name)
