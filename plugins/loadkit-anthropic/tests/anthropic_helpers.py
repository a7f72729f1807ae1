"""A local Messages server for the end-to-end tests, from loadkit's test kit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loadkit.testing.replay import fixture_body, split_events
from loadkit.testing.streamserver import Seen, Stream, stream_server

FIXTURES = Path(__file__).parent / "fixtures"
MODELS = b'{"data": [{"type": "model", "id": "claude-test", "display_name": "Test"}], "has_more": false}'


def stream_body(name: str) -> bytes:
    return fixture_body(FIXTURES / name)


@contextmanager
def messages_server(body: bytes) -> Iterator[tuple[str, list[Seen]]]:
    """Serve the model list and stream ``body`` (one event per chunk) for every POST /v1/messages."""
    routes = {
        ("GET", "/v1/models"): Stream([MODELS], content_type="application/json", stream=False),
        ("POST", "/v1/messages"): Stream(split_events(body, "sse")),
    }
    with stream_server(routes) as server:
        yield server.url, server.seen  # every request: the detector's GETs and the POSTs


def posts(seen: list[Seen]) -> list[Seen]:
    return [s for s in seen if s.method == "POST"]
