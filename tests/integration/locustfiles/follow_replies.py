"""locustfiles/agent.py's Agent, unchanged, with a trail of what it was told and what it did next.

Only the trail is added (written by `send`, after the request): the test checks that every turn
the agent sent next is the one its `decide` asks for, given the reply before it.
"""

import os

import orjson

import locustfiles.agent as example

TRAIL = os.environ["LOADKIT_TEST_TRAIL"]


class TrailedAgent(example.Agent):
    def send(self, request, budgeted=False):
        record = super().send(request, budgeted)
        line = {"session_id": request.session_id, "turn": request.turn, "label": request.label,
                "outcome": record.outcome, "text": record.text, "request_id": record.request_id,
                "worker": os.getpid()}  # fmt: skip
        with open(TRAIL, "ab") as fh:
            fh.write(orjson.dumps(line) + b"\n")
        return record
