"""The server's own per-request timings, normalised, and joined with the client's (issue 26).

Adapters pass an engine's timings through as ``RequestRecord.server_timings``, as the engine
sent them. :func:`normalise` recognises each engine's form by its keys and turns it into one
structure of stage times in ms (docs/metrics.md, "Server-side breakdown"):

* llama.cpp ``timings`` (final chunk of ``/completion`` and its OpenAI API): ``prompt_ms`` is
  prefill, ``predicted_ms`` decode; the wait for a slot is not reported (queue None).
* Ollama durations (ns, last line): ``prompt_eval_duration`` prefill, ``eval_duration`` decode,
  ``load_duration`` model load; queue = ``total_duration`` minus the three (what else the
  server spent: waiting for the runner, templating).
* SGLang native ``meta_info`` (seconds): ``queue_time`` (with ``--enable-metrics``) and
  ``e2e_latency``; prefill and decode are not split out.

:func:`join` adds what is left of the client's TTFT once the server's pre-first-token stages
are taken out: network + client (``residual_ttft_ms``), only where prefill was reported.
An engine that reports nothing gives None, never zeros. Runs once per request, off the
per-event path.
"""

from __future__ import annotations

from typing import Any

NS_PER_MS = 1_000_000
STAGES = ("queue_ms", "load_ms", "prefill_ms", "decode_ms")


def _num(obj: dict[str, Any], key: str, scale: float = 1.0) -> float | None:
    """``obj[key] * scale`` when it is a finite non-negative number, else None."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return None
    return float(value) * scale


def _count(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _per_token(total_ms: float | None, n: int | None) -> float | None:
    return None if total_ms is None or not n else total_ms / n


def _base(source: str) -> dict[str, Any]:
    return {"source": source, "queue_ms": None, "load_ms": None, "prefill_ms": None, "decode_ms": None,
            "decode_per_token_ms": None, "server_total_ms": None, "prompt_n": None, "cached_n": None,
            "decode_n": None}  # fmt: skip


def from_llamacpp(t: dict[str, Any]) -> dict[str, Any]:
    out = _base("llamacpp")
    out["prefill_ms"], out["decode_ms"] = _num(t, "prompt_ms"), _num(t, "predicted_ms")
    out["prompt_n"], out["cached_n"], out["decode_n"] = (
        _count(t, "prompt_n"),
        _count(t, "cache_n"),
        _count(t, "predicted_n"),
    )
    out["decode_per_token_ms"] = _per_token(out["decode_ms"], out["decode_n"])
    if out["prefill_ms"] is not None and out["decode_ms"] is not None:
        out["server_total_ms"] = out["prefill_ms"] + out["decode_ms"]
    return out


def from_ollama(t: dict[str, Any]) -> dict[str, Any]:
    out = _base("ollama")
    scale = 1 / NS_PER_MS
    out["load_ms"], out["prefill_ms"] = (
        _num(t, "load_duration", scale),
        _num(t, "prompt_eval_duration", scale),
    )
    out["decode_ms"], out["server_total_ms"] = (
        _num(t, "eval_duration", scale),
        _num(t, "total_duration", scale),
    )
    out["prompt_n"], out["decode_n"] = _count(t, "prompt_eval_count"), _count(t, "eval_count")
    out["decode_per_token_ms"] = _per_token(out["decode_ms"], out["decode_n"])
    parts = (out["load_ms"], out["prefill_ms"], out["decode_ms"])
    if out["server_total_ms"] is not None and all(p is not None for p in parts):
        out["queue_ms"] = max(out["server_total_ms"] - sum(p for p in parts if p is not None), 0.0)
    return out


def from_sglang(t: dict[str, Any]) -> dict[str, Any]:
    out = _base("sglang")
    out["queue_ms"], out["server_total_ms"] = _num(t, "queue_time", 1000.0), _num(t, "e2e_latency", 1000.0)
    out["prompt_n"], out["cached_n"] = _count(t, "prompt_tokens"), _count(t, "cached_tokens")
    out["decode_n"] = _count(t, "completion_tokens")
    return out


def normalise(timings: dict[str, Any] | None) -> dict[str, Any] | None:
    """One engine's timings as the neutral breakdown; None when none are recognised."""
    if not isinstance(timings, dict):
        return None
    if "prompt_ms" in timings or "predicted_ms" in timings:
        out = from_llamacpp(timings)
    elif "eval_duration" in timings or "prompt_eval_duration" in timings or "total_duration" in timings:
        out = from_ollama(timings)
    elif "e2e_latency" in timings or "queue_time" in timings:
        out = from_sglang(timings)
    else:
        return None
    if all(out[k] is None for k in (*STAGES, "server_total_ms")):
        return None  # keys present, no usable value: not reported
    return out


def pre_first_token_ms(b: dict[str, Any]) -> float | None:
    """The server's time before the first token (queue + load + prefill); None without prefill."""
    if b["prefill_ms"] is None:
        return None
    return b["prefill_ms"] + (b["queue_ms"] or 0.0) + (b["load_ms"] or 0.0)


def join(timings: dict[str, Any] | None, ttft_ms: float | None,
         decode_span_ms: float | None = None) -> dict[str, Any] | None:  # fmt: skip
    """The normalised breakdown joined with the client's figures:

    * ``residual_ttft_ms`` = client TTFT − (queue + load + prefill): network + client;
    * ``client_decode_per_token_ms`` = the client's first-to-last token span divided by the
      server's decode token count: per-token decode as the client saw it, on the server's
      own definition (llama.cpp divides its first-to-last span by all tokens, the first too).
    """
    out = normalise(timings)
    if out is None:
        return None
    server = pre_first_token_ms(out)
    out["residual_ttft_ms"] = None if server is None or ttft_ms is None else ttft_ms - server
    out["client_decode_per_token_ms"] = _per_token(decode_span_ms, out["decode_n"])
    return out
