"""User-API calls for tests/integration/test_user_calls.py; LOADKIT_TEST_CALL picks the task's call:

- ``fields``: a keyword body field and an ``extra_body`` field (both must reach the server);
- ``typo``: ``max_token=8`` (refused: the run stops with one line);
- ``dict``: one message dict instead of a list (refused the same way);
- ``client``: ``self.client`` of a class naming the ``big`` target asks that target's
  /v1/models and labels its request with the model that answered.
"""

import os

from locust import task

from loadkit import LLMUser

CALL = os.environ.get("LOADKIT_TEST_CALL", "fields")


class Calls(LLMUser):
    target = "big" if CALL == "client" else None

    @task
    def call(self) -> None:
        if CALL == "fields":
            self.chat("hi", max_tokens=4, temperature=0, extra_body={"top_k": 3}, label="fields")
        elif CALL == "typo":
            self.chat("hi", max_token=8)
        elif CALL == "dict":
            self.chat({"role": "user", "content": "hi"}, max_tokens=4)
        else:
            models = self.client.get("/v1/models", name="client: /v1/models").json()
            self.chat("hi", max_tokens=2, label=f"client:{models['data'][0]['id']}")
