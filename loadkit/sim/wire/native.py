"""Engines' own generate APIs: SGLang, TGI, Triton/TensorRT-LLM, llama.cpp and Ollama.

Shapes (one line each; details in docs/simulator.md):

* SGLang ``POST /generate``: ``data: {"text": <text so far>, "meta_info": {...}, "index": 0}``,
  cumulative text (SGLang's default), then ``data: [DONE]``.
* TGI ``POST /generate_stream``: ``data:{"index":i,"token":{...},...}`` (no space after the
  colon: axum's SSE), one event per token, the last carries ``generated_text``; no end marker.
* Triton ``POST /v2/models/<m>/generate_stream``: ``data: {"model_name":..,"text_output":..}``,
  delta text; the stream just ends.
* llama.cpp ``POST /completion``: ``data: {"index":0,"content":..,"tokens":[..],"stop":false,..}``,
  a final ``stop: true`` event with ``timings``; no ``[DONE]``.
* Ollama ``POST /api/generate`` and ``/api/chat``: NDJSON, ``done: true`` on the last line.
"""

from __future__ import annotations

import time
from typing import Any

from loadkit.sim.wire.common import (
    Outcome,
    RequestSpec,
    StreamFormat,
    as_int,
    dumps,
    json_str,
    messages_prompt,
)
from loadkit.sim.wire.openai import DONE, llama_error, llama_timings

# ---- SGLang --------------------------------------------------------------------------------


def parse_sglang(body: dict[str, Any], default_max: int, model: str) -> RequestSpec:
    text, ids = body.get("text"), body.get("input_ids")
    if not isinstance(text, str) and not (isinstance(ids, list) and ids):
        raise ValueError("Either text or input_ids should be provided.")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise ValueError("sampling_params must be an object")
    max_new = as_int(params, "max_new_tokens", min(default_max, 128))
    min_new = as_int(params, "min_new_tokens", 0)
    return RequestSpec(
        prompt=text if isinstance(text, str) else "",
        prompt_ids=list(ids) if isinstance(ids, list) and ids else None,
        max_tokens=_positive(max_new, "max_new_tokens"),
        min_tokens=min_new,
        exact=bool(params.get("ignore_eos")) or min_new >= max_new,
        stream=bool(body.get("stream")),
        model=model,
    )


def _positive(value: int, name: str) -> int:
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def sglang_error(status: int, message: str) -> bytes:
    return dumps({"error": {"message": message}})


def sglang_timings(out: Outcome) -> dict[str, float]:
    """The final meta_info's timings, in seconds: ``queue_time`` (SGLang sends it with
    --enable-metrics) and ``e2e_latency`` (arrival to the last token)."""
    return {
        "queue_time": out.queue_ms / 1000,
        "e2e_latency": (out.queue_ms + out.prefill_ms + out.decode_ms) / 1000,
    }


class SglangGenerate(StreamFormat):
    def meta(self, n_out: int, out: Outcome | None) -> dict[str, Any]:
        finish: dict[str, Any] | None = None
        if (
            out is not None
        ):  # SGLang: {"type": "length", "length": N} or {"type": "stop", "matched": <eos id>}
            finish = (
                {"type": "length", "length": n_out}
                if out.finish_reason == "length"
                else {"type": "stop", "matched": 2}
            )
        meta: dict[str, Any] = {
            "id": self.rid, "finish_reason": finish,
            "prompt_tokens": out.prompt_tokens if out else self.n_prompt,
            "completion_tokens": n_out, "cached_tokens": out.cached_tokens if out else self.n_cached,
        }  # fmt: skip
        if out is not None:
            meta.update(sglang_timings(out))
        return meta

    def server_timings(self, out: Outcome) -> dict[str, Any] | None:
        """What loadkit's SGLang adapter passes on from the final meta_info."""
        timings = sglang_timings(out)
        return {"e2e_latency": timings["e2e_latency"], "queue_time": timings["queue_time"],
                "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                "cached_tokens": out.cached_tokens}  # fmt: skip

    def token(self, text: bytes, index: int, n: int) -> bytes:
        so_far = self.corpus.text_of(self.start_word, 0, index + n)
        return b'data: {"text":%s,"meta_info":%s,"index":0}\n\n' % (
            json_str(so_far),
            dumps(self.meta(index + n, None)),
        )

    def last_token(self, text: bytes, index: int, n: int, out: Outcome) -> bytes:
        so_far = self.corpus.text_of(self.start_word, 0, index + n)
        return b'data: {"text":%s,"meta_info":%s,"index":0}\n\n' % (
            json_str(so_far),
            dumps(self.meta(index + n, out)),
        )

    def end(self, out: Outcome) -> bytes:
        return DONE

    def error(self, message: str) -> bytes:
        return b"data: " + sglang_error(500, message) + b"\n\n" + DONE

    def malformed(self) -> bytes:
        return b'data: {"text":"\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps({"text": text.decode(), "meta_info": self.meta(out.completion_tokens, out)})


# ---- TGI -----------------------------------------------------------------------------------


def parse_tgi(body: dict[str, Any], default_max: int, model: str) -> RequestSpec:
    inputs = body.get("inputs")
    if not isinstance(inputs, str):
        raise ValueError("Failed to deserialize the JSON body into the target type: missing field `inputs`")
    params = body.get("parameters") or {}
    if not isinstance(params, dict):
        raise ValueError("Failed to deserialize the JSON body into the target type: parameters")
    max_new = _positive(as_int(params, "max_new_tokens", min(default_max, 100)), "max_new_tokens")
    return RequestSpec(
        prompt=inputs,
        max_tokens=max_new,
        stream=bool(body.get("stream")),
        model=model,
        exact=bool(params.get("ignore_eos")),
        include_usage=bool(params.get("details")),
    )


def tgi_error(status: int, message: str, kind: str = "validation") -> bytes:
    return dumps({"error": message, "error_type": kind})


class TgiGenerateStream(StreamFormat):
    def _events(self, index: int, n: int, final: bytes | None) -> bytes:
        ids = self.ids(index, n)
        parts = []
        for k in range(n):
            text = self.corpus.text_of(self.start_word, index + k, 1)
            tail = final if (final is not None and k == n - 1) else b'"generated_text":null,"details":null'
            parts.append(
                b'data:{"index":%d,"token":{"id":%d,"text":%s,"logprob":-0.5,"special":false},%s,"top_tokens":null}\n\n'
                % (index + k + 1, ids[k], json_str(text), tail)
            )
        return b"".join(parts)

    def token(self, text: bytes, index: int, n: int) -> bytes:
        return self._events(index, n, None)

    def last_token(self, text: bytes, index: int, n: int, out: Outcome) -> bytes:
        full = self.corpus.text_of(self.start_word, 0, index + n)
        details = b"null"
        if self.spec.include_usage:
            details = dumps(
                {
                    "finish_reason": _tgi_finish(out),
                    "generated_tokens": out.completion_tokens,
                    "seed": None,
                    "input_length": out.prompt_tokens,
                }
            )
        return self._events(index, n, b'"generated_text":%s,"details":%s' % (json_str(full), details))

    def end(self, out: Outcome) -> bytes:
        return b""

    def error(self, message: str) -> bytes:
        return b"data:" + tgi_error(500, message, "generation") + b"\n\n"

    def malformed(self) -> bytes:
        return b'data:{"index":1,"token":{\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        obj: dict[str, Any] = {"generated_text": text.decode()}
        if self.spec.include_usage:
            obj["details"] = {
                "finish_reason": _tgi_finish(out),
                "generated_tokens": out.completion_tokens,
                "seed": None,
                "prefill": [],
                "tokens": [],
            }
        return dumps(obj)


def _tgi_finish(out: Outcome) -> str:
    return "length" if out.finish_reason == "length" else "eos_token"


# ---- Triton / TensorRT-LLM -----------------------------------------------------------------


def parse_triton(body: dict[str, Any], default_max: int, model: str) -> RequestSpec:
    text = body.get("text_input")
    if not isinstance(text, str):
        raise ValueError("missing text_input")
    max_tokens = _positive(as_int(body, "max_tokens", default_max), "max_tokens")
    min_len = as_int(body, "min_tokens", as_int(body, "min_length", 0))
    return RequestSpec(
        prompt=text,
        max_tokens=max_tokens,
        min_tokens=min_len,
        stream=True,
        model=model,
        exact=bool(body.get("ignore_eos")) or min_len >= max_tokens,
    )


def triton_error(status: int, message: str) -> bytes:
    return dumps({"error": message})


class TritonGenerate(StreamFormat):
    fixed_frame = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.head = (
            b'data: {"model_name":%s,"model_version":"1","sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":'
            % dumps(self.spec.model)
        )

    def token(self, text: bytes, index: int, n: int) -> bytes:
        return self.head + json_str(text) + b"}\n\n"

    def end(self, out: Outcome) -> bytes:
        return b""

    def error(self, message: str) -> bytes:
        return b"data: " + triton_error(500, message) + b"\n\n"

    def malformed(self) -> bytes:
        return self.head + b'"\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps(
            {
                "model_name": self.spec.model,
                "model_version": "1",
                "sequence_end": False,
                "sequence_id": 0,
                "sequence_start": False,
                "text_output": text.decode(),
            }
        )


# ---- llama.cpp /completion -----------------------------------------------------------------


def parse_llama_native(body: dict[str, Any], default_max: int, model: str) -> RequestSpec:
    prompt: Any = body.get("prompt")
    ids: list[int] | None = None
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompt, ids = "", [int(t) for t in prompt]
    if not isinstance(prompt, str):
        raise ValueError('"prompt" must be provided')
    n_predict = as_int(body, "n_predict", as_int(body, "max_tokens", -1))
    n_predict = default_max if n_predict < 0 else _positive(n_predict, "n_predict")
    return RequestSpec(
        prompt=prompt,
        prompt_ids=ids,
        max_tokens=n_predict,
        stream=bool(body.get("stream")),
        model=model,
        exact=bool(body.get("ignore_eos")),
        cache_prompt=body.get("cache_prompt", True) is not False,
    )


class LlamaNative(StreamFormat):
    def token(self, text: bytes, index: int, n: int) -> bytes:
        ids = b",".join(b"%d" % i for i in self.ids(index, n))
        return (
            b'data: {"index":0,"content":%s,"tokens":[%s],"stop":false,"id_slot":-1,"tokens_predicted":%d,"tokens_evaluated":%d}\n\n'
            % (json_str(text), ids, index + n, self.n_prompt)
        )

    def final(self, out: Outcome) -> dict[str, Any]:
        return {
            "index": 0, "content": "", "tokens": [], "id_slot": 0, "stop": True, "model": self.spec.model,
            "tokens_predicted": out.completion_tokens, "tokens_evaluated": out.prompt_tokens,
            "generation_settings": {"n_predict": self.spec.max_tokens, "ignore_eos": self.spec.exact,
                                    "stream": self.spec.stream},
            "prompt": self.spec.prompt, "has_new_line": False, "truncated": False,
            "stop_type": "limit" if out.finish_reason == "length" else "eos", "stopping_word": "",
            "tokens_cached": out.prompt_tokens + out.completion_tokens - 1, "timings": llama_timings(out),
        }  # fmt: skip

    def end(self, out: Outcome) -> bytes:
        return b"data: " + dumps(self.final(out)) + b"\n\n"

    def error(self, message: str) -> bytes:
        return b"error: " + llama_error(500, message, "server_error") + b"\n\n"

    def malformed(self) -> bytes:
        return b'data: {"index":0,"content":"\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        final = self.final(out)
        final["content"] = text.decode()
        return dumps(final)

    def server_timings(self, out: Outcome) -> dict[str, Any]:
        return llama_timings(out)


# ---- Ollama --------------------------------------------------------------------------------


def parse_ollama(body: dict[str, Any], chat: bool, default_max: int, model: str) -> RequestSpec:
    prompt: Any
    if chat:
        prompt = messages_prompt(body.get("messages"))
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("prompt is required")
    opts = body.get("options") or {}
    if not isinstance(opts, dict):
        raise ValueError("options must be an object")
    n = as_int(opts, "num_predict", -1)
    n = default_max if n < 0 else _positive(n, "num_predict")
    return RequestSpec(
        prompt=prompt,
        max_tokens=n,
        stream=body.get("stream", True) is not False,
        model=str(body.get("model") or model),
    )


def ollama_error(status: int, message: str) -> bytes:
    return dumps({"error": message})


_stamp_cache: tuple[int, bytes] = (0, b"")


def created_at() -> bytes:
    """Go's RFC 3339 UTC timestamp, recomputed at most once per millisecond (it is per event)."""
    global _stamp_cache
    now = time.time_ns()
    if now // 1_000_000 != _stamp_cache[0]:
        secs, ns = divmod(now, 1_000_000_000)
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ns:09d}Z"
        _stamp_cache = (now // 1_000_000, b'"' + text.encode() + b'"')
    return _stamp_cache[1]


class OllamaGenerate(StreamFormat):
    content_type = "application/x-ndjson"
    ndjson = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.model_b = dumps(self.spec.model)

    def token(self, text: bytes, index: int, n: int) -> bytes:
        return b'{"model":%s,"created_at":%s,"response":%s,"done":false}\n' % (
            self.model_b,
            created_at(),
            json_str(text),
        )

    def reasoning_chunk(self, text: bytes, index: int, n: int) -> bytes:
        return b'{"model":%s,"created_at":%s,"response":"","thinking":%s,"done":false}\n' % (
            self.model_b,
            created_at(),
            json_str(text),
        )

    def stats(self, out: Outcome) -> bytes:
        return dumps(self.server_timings(out))[1:-1]

    def server_timings(self, out: Outcome) -> dict[str, Any]:
        """Ollama's durations (ns): the total runs from arrival, so it holds the queueing too."""
        queue_ns, prefill_ns, decode_ns = (
            int(out.queue_ms * 1e6),
            int(out.prefill_ms * 1e6),
            int(out.decode_ms * 1e6),
        )
        return {"total_duration": queue_ns + prefill_ns + decode_ns, "load_duration": 0,
                "prompt_eval_count": out.prompt_tokens, "prompt_eval_duration": prefill_ns,
                "eval_count": out.completion_tokens, "eval_duration": decode_ns}  # fmt: skip

    def end(self, out: Outcome) -> bytes:
        return b'{"model":%s,"created_at":%s,"response":"","done":true,"done_reason":%s,%s}\n' % (
            self.model_b,
            created_at(),
            dumps(out.finish_reason),
            self.stats(out),
        )

    def error(self, message: str) -> bytes:
        return ollama_error(500, message) + b"\n"

    def malformed(self) -> bytes:
        return b'{"model":%s,"response":\n' % self.model_b

    def body(self, text: bytes, out: Outcome) -> bytes:
        return b'{"model":%s,"created_at":%s,"response":%s,"done":true,"done_reason":%s,%s}' % (
            self.model_b,
            created_at(),
            json_str(text),
            dumps(out.finish_reason),
            self.stats(out),
        )


class OllamaChat(OllamaGenerate):
    def token(self, text: bytes, index: int, n: int) -> bytes:
        return b'{"model":%s,"created_at":%s,"message":{"role":"assistant","content":%s},"done":false}\n' % (
            self.model_b,
            created_at(),
            json_str(text),
        )

    def reasoning_chunk(self, text: bytes, index: int, n: int) -> bytes:
        return (
            b'{"model":%s,"created_at":%s,"message":{"role":"assistant","content":"","thinking":%s},"done":false}\n'
            % (self.model_b, created_at(), json_str(text))
        )

    def end(self, out: Outcome) -> bytes:
        return (
            b'{"model":%s,"created_at":%s,"message":{"role":"assistant","content":""},"done_reason":%s,"done":true,%s}\n'
            % (self.model_b, created_at(), dumps(out.finish_reason), self.stats(out))
        )

    def body(self, text: bytes, out: Outcome) -> bytes:
        return (
            b'{"model":%s,"created_at":%s,"message":{"role":"assistant","content":%s},"done_reason":%s,"done":true,%s}'
            % (self.model_b, created_at(), json_str(text), dumps(out.finish_reason), self.stats(out))
        )
