"""Token counts from the server's own tokenize endpoint, for exact prompts without a local tokenizer.

``tokenize_format`` names the engine whose tokenize endpoint the server speaks; the request and
the reading of its answer are that engine adapter's (``tokenize_request`` / ``parse_tokenize``,
loadkit/engines/), sent through loadkit/servers/info.py's ``tokenize``, the one tokenize path:
  llamacpp  POST /tokenize {"content", "add_special": false} -> {"tokens": [...]}
  vllm      POST /tokenize {"model", "prompt", "add_special_tokens": false} -> {"count": n, "tokens": [...]}
            (SGLang serves the same shape)
  tgi       POST /tokenize {"inputs"} -> [{"id", "text", "start", "stop"}, ...]
"""

from __future__ import annotations

from loadkit.core.adapter import AdapterExtras, AdapterOptions
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.servers.http import split_url
from loadkit.servers.info import tokenize
from loadkit.workload.text import ExactBuilder

ADAPTERS: dict[str, type[AdapterExtras]] = {
    "llamacpp": LlamaCppAdapter,
    "vllm": VLLMAdapter,
    "tgi": TGIAdapter,
}
FORMATS = tuple(ADAPTERS)
_TIMEOUT_S = 30.0


def server_builder(url: str, fmt: str, model: str | None = None) -> ExactBuilder:
    """An exact builder whose counter POSTs to ``url`` (a loopback tokenize endpoint) as the
    ``fmt`` engine's adapter asks; https uses this process's TLS context (loadkit/client/tls.py),
    as every connection to a target does. A failed count raises (OSError, or TokenizeError
    when the server answers without one): an exact prompt cannot be guessed."""
    adapter = ADAPTERS[fmt](AdapterOptions(model=model))
    base, path = split_url(url)
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        if text in cache:
            return cache[text]
        n = tokenize(adapter, base, text, path=path, timeout_s=_TIMEOUT_S)
        if len(cache) > 4096:
            cache.clear()
        cache[text] = n
        return n

    return ExactBuilder(f"server:{url}", count)
