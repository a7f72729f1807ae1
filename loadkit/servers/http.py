"""The one HTTP helper for everything that is not a timed stream: probing a server for
``--engine auto``, reading its info endpoints, tokenizing, fetching ``/metrics``.

Plain ``http.client`` with a timeout on every call (under Locust the socket module is gevent's,
so these cooperate with running users). Only the stream timer measures anything. https URLs
use the given SSL context, else the process's (loadkit/client/tls.py: the run's TLS options); a
TLS failure raises ``TlsError`` (an OSError) whose message says why.
"""

from __future__ import annotations

import http.client
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from loadkit.client.tls import TlsError, describe_error, process_context
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


def split_url(url: str) -> tuple[str, str]:
    """``(base URL, path)`` of a full URL: ``https://h:1/a/b`` -> ``("https://h:1", "/a/b")``."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return f"{parts.scheme}://{parts.netloc}", parts.path or "/"


def _connection(base_url: str, timeout_s: float,
                ssl_context: ssl.SSLContext | None) -> tuple[http.client.HTTPConnection, str]:  # fmt: skip
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {base_url!r}")
    prefix = parts.path.rstrip("/")
    if parts.scheme == "https":
        context = ssl_context or process_context()
        return http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout_s, context=context
        ), prefix
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s), prefix


def fetch(base_url: str, request: HttpRequest, timeout_s: float = 2.0,
          ssl_context: ssl.SSLContext | None = None) -> Response:  # fmt: skip
    """Send one request and read the whole (bounded) response. Raises OSError when the
    server cannot be reached or does not answer within ``timeout_s`` (TlsError: TLS failed)."""
    conn, prefix = _connection(base_url, timeout_s, ssl_context)
    try:
        conn.request(request.method, prefix + request.path, body=request.body, headers=request.headers)
        resp = conn.getresponse()
        body = resp.read(MAX_BODY)
        headers = {k.lower(): v for k, v in resp.getheaders()}
        return Response(resp.status, headers, body)
    except http.client.HTTPException as exc:
        raise OSError(f"bad HTTP response: {exc!r}") from exc
    except ssl.SSLError as exc:
        raise TlsError(describe_error(exc, conn.host)) from None
    finally:
        conn.close()


def get(base_url: str, path: str, timeout_s: float = 2.0, headers: dict[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None) -> Response:  # fmt: skip
    return fetch(base_url, HttpRequest("GET", path, None, dict(headers or {})), timeout_s, ssl_context)
