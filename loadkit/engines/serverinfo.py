"""Small synchronous HTTP helpers for everything that is not a timed stream: probing a server
for ``--engine auto``, reading its info endpoints, tokenizing, fetching ``/metrics``.

Plain ``http.client`` with a timeout on every call (under Locust the socket module is gevent's,
so these cooperate with running users). Only the stream timer measures anything.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from loadkit.engines.base import EngineAdapter
from loadkit.types import HttpRequest

MAX_BODY = 1 << 20


@dataclass(slots=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _connection(base_url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {base_url!r}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname, parts.port, timeout=timeout_s), parts.path.rstrip("/")


def fetch(base_url: str, request: HttpRequest, timeout_s: float = 2.0) -> Response:
    """Send one request and read the whole (bounded) response. Raises OSError when the
    server cannot be reached or does not answer within ``timeout_s``."""
    conn, prefix = _connection(base_url, timeout_s)
    try:
        conn.request(request.method, prefix + request.path, body=request.body, headers=request.headers)
        resp = conn.getresponse()
        body = resp.read(MAX_BODY)
        headers = {k.lower(): v for k, v in resp.getheaders()}
        return Response(resp.status, headers, body)
    except http.client.HTTPException as exc:
        raise OSError(f"bad HTTP response: {exc!r}") from exc
    finally:
        conn.close()


def get(base_url: str, path: str, timeout_s: float = 2.0, headers: dict[str, str] | None = None) -> Response:
    return fetch(base_url, HttpRequest("GET", path, None, dict(headers or {})), timeout_s)


def auth_headers(adapter: EngineAdapter) -> dict[str, str]:
    """The adapter's headers minus content negotiation, for plain GETs."""
    return {k: v for k, v in adapter.base_headers().items() if k not in ("Content-Type", "Accept")}


def describe(adapter: EngineAdapter, base_url: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """Engine version, model, limits: the adapter's reading of its ``info_paths``."""
    responses: dict[str, Any] = {}
    for path in adapter.info_paths:
        try:
            resp = get(base_url, path, timeout_s, auth_headers(adapter))
        except OSError:
            continue
        if resp.status == 200:
            body = resp.json()
            responses[path] = body if body is not None else resp.text
    return adapter.describe_server(responses)


def count_tokens(adapter: EngineAdapter, base_url: str, text: str, timeout_s: float = 5.0) -> int | None:
    """Tokens in ``text`` by the server's own tokenizer; None when the engine has no tokenize
    endpoint or it did not answer with a count."""
    make = getattr(adapter, "tokenize_request", None)
    request = make(text) if make is not None else None
    if request is None:
        return None
    try:
        resp = fetch(base_url, request, timeout_s)
    except OSError:
        return None
    if resp.status != 200:
        return None
    result = adapter.parse_tokenize(resp.json())  # type: ignore[attr-defined]
    return result if isinstance(result, int) else None
