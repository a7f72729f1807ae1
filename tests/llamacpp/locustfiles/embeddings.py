"""Embeddings requests through the user API, for tests/llamacpp/test_kinds.py: each task sends
one request of one input ("single") or of four ("batch"), the inputs' texts given by
LOADKIT_TEST_INPUTS (a JSON list of strings)."""

import itertools
import json
import os

from locust import task

from loadkit import LLMUser
from loadkit.types import GenerationRequest

INPUTS = json.loads(os.environ["LOADKIT_TEST_INPUTS"])


class Embedder(LLMUser):
    def on_start(self) -> None:
        super().on_start()
        self.turn = itertools.count()

    @task
    def embed(self) -> None:
        n = 1 if next(self.turn) % 2 == 0 else 4
        inputs = INPUTS[:n]
        self.send(
            GenerationRequest(
                kind="embeddings", inputs=inputs, n_items=n, label="single" if n == 1 else "batch"
            )
        )
