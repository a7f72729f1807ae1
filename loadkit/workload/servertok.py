"""Token counts from the server's own tokenize endpoint, for exact prompts without a local tokenizer.

Formats (request body -> response):
  llamacpp  POST /tokenize {"content", "add_special": false} -> {"tokens": [...]}
  vllm      POST /tokenize {"model", "prompt", "add_special_tokens": false} -> {"count": n, "tokens": [...]}
            (SGLang serves the same shape)
  tgi       POST /tokenize {"inputs"} -> [{"id", "text", "start", "stop"}, ...]
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from loadkit.client.tls import process_context
from loadkit.workload.text import ExactBuilder

FORMATS = ("llamacpp", "vllm", "tgi")
_TIMEOUT_S = 30.0


def _body(fmt: str, text: str, model: str | None) -> dict[str, Any]:
    if fmt == "llamacpp":
        return {"content": text, "add_special": False}
    if fmt == "vllm":
        return {"model": model or "default", "prompt": text, "add_special_tokens": False}
    return {"inputs": text}


def _count_from(response: Any) -> int:
    if isinstance(response, list):
        return len(response)
    if isinstance(response, dict):
        if isinstance(response.get("count"), int):
            return int(response["count"])
        if isinstance(response.get("tokens"), list):
            return len(response["tokens"])
    raise ValueError(f"tokenize endpoint answered without a token count: {str(response)[:120]!r}")


def server_builder(url: str, fmt: str, model: str | None = None) -> ExactBuilder:
    """An exact builder whose counter POSTs to ``url`` (a loopback tokenize endpoint; https
    uses this process's TLS context, loadkit/client/tls.py)."""
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        if text in cache:
            return cache[text]
        data = json.dumps(_body(fmt, text, model)).encode()
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        # https: the run's TLS options (loadkit/client/tls.py), as for every connection to a target.
        context = process_context() if url.lower().startswith("https:") else None
        with urllib.request.urlopen(req, timeout=_TIMEOUT_S, context=context) as resp:
            n = _count_from(json.loads(resp.read()))
        if len(cache) > 4096:
            cache.clear()
        cache[text] = n
        return n

    return ExactBuilder(f"server:{url}", count)
