"""What a server says about itself, asked through its adapter: engine version and model from
the ``info_paths``, and token counts from its own tokenizer (the adapter's
``tokenize_request`` / ``parse_tokenize``: the one tokenize path, used by the scenarios'
``tokenizer = "server"`` through loadkit/workload/servertok.py).
"""

from __future__ import annotations

import ssl
from typing import Any

from loadkit.core.adapter import EngineAdapter
from loadkit.servers.http import fetch, get


class TokenizeError(ValueError):
    """No token count: the engine has no tokenize endpoint, or it answered without a count
    (or not with 200)."""


def auth_headers(adapter: EngineAdapter) -> dict[str, str]:
    """The adapter's headers minus content negotiation, for plain GETs."""
    return {k: v for k, v in adapter.base_headers().items() if k not in ("Content-Type", "Accept")}


def describe(adapter: EngineAdapter, base_url: str, timeout_s: float = 2.0,
             ssl_context: ssl.SSLContext | None = None) -> dict[str, Any]:  # fmt: skip
    """Engine version, model, limits: the adapter's reading of its ``info_paths``."""
    responses: dict[str, Any] = {}
    for path in adapter.info_paths:
        try:
            resp = get(base_url, path, timeout_s, auth_headers(adapter), ssl_context)
        except OSError:
            continue
        if resp.status == 200:
            body = resp.json()
            responses[path] = body if body is not None else resp.text
    return adapter.describe_server(responses)


def tokenize(adapter: EngineAdapter, base_url: str, text: str, *, path: str | None = None,
             timeout_s: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> int:  # fmt: skip
    """Tokens in ``text`` by the server's own tokenizer, asked the adapter's way; ``path``
    replaces the adapter's tokenize path (a scenario's ``tokenize_url``). OSError when the
    server cannot be reached, TokenizeError when the adapter has no tokenize request or the
    server answers without a count."""
    make = getattr(adapter, "tokenize_request", None)
    request = make(text) if make is not None else None
    if request is None:
        raise TokenizeError(f"engine {adapter.name!r} has no tokenize endpoint")
    if path is not None:
        request.path = path
    resp = fetch(base_url, request, timeout_s, ssl_context)
    if resp.status != 200:
        raise TokenizeError(f"tokenize endpoint {base_url}{request.path}: HTTP {resp.status}")
    result = adapter.parse_tokenize(resp.json())  # type: ignore[attr-defined]
    if not isinstance(result, int):
        raise TokenizeError(f"tokenize endpoint answered without a token count: {resp.text[:120]!r}")
    return result


def count_tokens(adapter: EngineAdapter, base_url: str, text: str, timeout_s: float = 5.0,
                 ssl_context: ssl.SSLContext | None = None) -> int | None:  # fmt: skip
    """:func:`tokenize`, or None when the engine has no tokenize endpoint or it did not answer
    with a count."""
    try:
        return tokenize(adapter, base_url, text, timeout_s=timeout_s, ssl_context=ssl_context)
    except (OSError, TokenizeError):
        return None
