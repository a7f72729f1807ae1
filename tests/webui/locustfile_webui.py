"""Test locustfile: loadkit's own locustfile plus the web UI installer on ``init``.

Until the glue calls ``install_web_ui`` itself this is how the browser tests get the LLM view.
"""

from locust import events

from loadkit.glue.locustfile import LLM  # noqa: F401  (Locust collects User classes by name)
from loadkit.webui import install_web_ui

events.init.add_listener(lambda environment, **_: install_web_ui(environment))
