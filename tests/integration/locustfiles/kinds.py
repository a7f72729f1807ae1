"""Embeddings or rerank requests through the user API, for tests/llamacpp/test_kinds.py and
tests/integration/test_kinds_sim.py. LOADKIT_TEST_INPUTS is a JSON list of texts (at least
four); LOADKIT_TEST_KIND picks the kind (default embeddings). Each task sends one request of one
item ("single") or four ("batch"), in turn: inputs to embed, or documents ranked against a
query (top_n from LOADKIT_TEST_TOP_N where set)."""

import itertools
import json
import os

from locust import task

from loadkit import LLMUser
from loadkit.types import GenerationRequest

TEXTS = json.loads(os.environ["LOADKIT_TEST_INPUTS"])
KIND = os.environ.get("LOADKIT_TEST_KIND", "embeddings")
TOP_N = int(os.environ["LOADKIT_TEST_TOP_N"]) if os.environ.get("LOADKIT_TEST_TOP_N") else None


class KindUser(LLMUser):
    def on_start(self) -> None:
        super().on_start()
        self.turn = itertools.count()

    @task
    def send_one(self) -> None:
        n = 1 if next(self.turn) % 2 == 0 else 4
        label = "single" if n == 1 else "batch"
        if KIND == "embeddings":
            request = GenerationRequest(kind="embeddings", inputs=TEXTS[:n], n_items=n, label=label)
        else:
            request = GenerationRequest(kind="rerank", query="which text", documents=TEXTS[:n], n_items=n,
                                        top_n=TOP_N, label=label)  # fmt: skip
        self.send(request)
