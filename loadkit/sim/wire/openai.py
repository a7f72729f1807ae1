"""OpenAI completions and chat completions, in two flavours seen in the wild.

* ``VllmCompletion`` / ``VllmChat`` — vLLM's serving_completion / serving_chat: chunks carry
  ``id, object, created, model, choices``; the chat stream opens with a role chunk
  (``{"role":"assistant","content":""}``); the last token chunk carries ``finish_reason``; with
  ``stream_options.include_usage`` a ``choices: []`` usage chunk follows; then ``data: [DONE]``.
  SGLang, TGI and Ollama's OpenAI routes are served in this flavour too.
* ``LlamaCompletion`` / ``LlamaChat`` — llama.cpp's server, key order and extras as in the
  real captures in tests/sim/fixtures/llamacpp_*.txt (``system_fingerprint``, ``timings``, role chunk with
  ``content: null``, a separate finish chunk with an empty delta).
"""

from __future__ import annotations

from typing import Any

from loadkit.sim.images import image_parts, image_token_ids
from loadkit.sim.wire.common import (
    Outcome,
    RequestSpec,
    StreamFormat,
    as_int,
    check_tool_messages,
    dumps,
    json_str,
    messages_prompt,
    tool_name,
)

DONE = b"data: [DONE]\n\n"


def parse_openai(body: dict[str, Any], chat: bool, default_max: int, model: str) -> RequestSpec:
    """Read an OpenAI request body; ValueError names the offending field."""
    images: list[int] | None = None
    parts: list[tuple[int, int, bytes]] = []
    if chat:
        prompt, ids = messages_prompt(body.get("messages")), None
        check_tool_messages(body.get("messages"))
        parts = image_parts(body.get("messages"))
        images = image_token_ids(parts) or None
    else:
        prompt, ids = _completion_prompt(body.get("prompt"))
    max_tokens = as_int(body, "max_completion_tokens", as_int(body, "max_tokens", default_max))
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    min_tokens = as_int(body, "min_tokens", 0)
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise ValueError("stream_options must be an object")
    return RequestSpec(
        priority=as_int(body, "priority", 0),
        continuous_usage=bool(opts.get("continuous_usage_stats")),
        prompt=prompt,
        prompt_ids=ids,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        exact=bool(body.get("ignore_eos")) or min_tokens >= max_tokens,
        stream=bool(body.get("stream")),
        include_usage=bool(opts.get("include_usage")),
        model=str(body.get("model") or model),
        cache_prompt=body.get("cache_prompt", True) is not False,
        tool_name=tool_name(body) if chat else None,
        image_ids=images,
        image_count=len(parts),
    )


def _completion_prompt(prompt: Any) -> tuple[str, list[int] | None]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt, None
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return "", list(prompt)
    raise ValueError("prompt must be a string or a list of token ids")


def usage_dict(out: Outcome) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": out.prompt_tokens,
        "total_tokens": out.prompt_tokens + out.completion_tokens,
        "completion_tokens": out.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": out.cached_tokens},
    }
    if out.image_tokens:  # the gateways' field (vLLM itself counts them in prompt_tokens only)
        usage["prompt_tokens_details"]["image_tokens"] = out.image_tokens
    if out.reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": out.reasoning_tokens}
    return usage


def llama_usage(out: Outcome) -> dict[str, Any]:
    """llama.cpp orders the usage keys differently from vLLM."""
    return {
        "completion_tokens": out.completion_tokens,
        "prompt_tokens": out.prompt_tokens,
        "total_tokens": out.prompt_tokens + out.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": out.cached_tokens,
                                  **({"image_tokens": out.image_tokens} if out.image_tokens else {})},
    }  # fmt: skip


def openai_error(status: int, message: str, kind: str = "BadRequestError") -> bytes:
    """vLLM's ErrorResponse body."""
    return dumps({"error": {"message": message, "type": kind, "param": None, "code": status}})


class VllmCompletion(StreamFormat):
    """vLLM /v1/completions."""

    object_name = b"text_completion"
    id_prefix = "cmpl-"
    fixed_frame = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        head = b'data: {"id":"%s","object":"%s","created":%d,"model":%s,"choices":[' % (
            (self.id_prefix + self.rid).encode(),
            self.object_name,
            self.created,
            dumps(self.spec.model),
        )
        self.head = head
        self.tail = b"]}\n\n"
        if self.spec.continuous_usage:  # usage in every chunk: the frame changes per event
            self.fixed_frame = False

    def running_tail(self, n_out: int) -> bytes:
        if not self.spec.continuous_usage:
            return self.tail
        p = self.n_prompt
        return b'],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}\n\n' % (
            p,
            p + n_out,
            n_out,
        )

    def choice(self, text: bytes, finish: bytes) -> bytes:
        return b'{"index":0,"text":%s,"logprobs":null,"finish_reason":%s,"stop_reason":null}' % (
            json_str(text),
            finish,
        )

    def token(self, text: bytes, index: int, n: int) -> bytes:
        return self.head + self.choice(text, b"null") + self.running_tail(index + n)

    def last_token(self, text: bytes, index: int, n: int, out: Outcome) -> bytes:
        # vLLM puts finish_reason on the chunk with the last text.
        return self.head + self.choice(text, dumps(out.finish_reason)) + self.running_tail(index + n)

    def end(self, out: Outcome) -> bytes:
        if not self.spec.include_usage:
            return DONE
        usage = b"data: " + self.head[6:] + b'],"usage":' + dumps(usage_dict(out)) + b"}\n\n"
        return usage + DONE

    def error(self, message: str) -> bytes:
        return b"data: " + openai_error(500, message, "InternalServerError") + b"\n\n" + DONE

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps({
            "id": self.id_prefix + self.rid, "object": "text_completion", "created": self.created,
            "model": self.spec.model,
            "choices": [{"index": 0, "text": text.decode(), "logprobs": None,
                         "finish_reason": out.finish_reason, "stop_reason": None}],
            "usage": usage_dict(out),
        })  # fmt: skip


class VllmChat(VllmCompletion):
    """vLLM /v1/chat/completions."""

    object_name = b"chat.completion.chunk"
    id_prefix = "chatcmpl-"

    def choice(self, text: bytes, finish: bytes) -> bytes:
        return b'{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":%s}' % (
            json_str(text),
            finish,
        )

    def start(self) -> bytes:
        role = b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}'
        return self.head + role + self.running_tail(0)

    def reasoning_chunk(self, text: bytes, index: int, n: int) -> bytes:
        return (
            self.head
            + b'{"index":0,"delta":{"reasoning_content":%s},"logprobs":null,"finish_reason":null}'
            % (json_str(text))
            + self.running_tail(index + n)
        )

    def token(self, text: bytes, index: int, n: int) -> bytes:
        if self.spec.tool_name is None:
            return super().token(text, index, n)
        return self.head + self.tool_call(text, index, b"null") + self.running_tail(index + n)

    def last_token(self, text: bytes, index: int, n: int, out: Outcome) -> bytes:
        if self.spec.tool_name is None:
            return super().last_token(text, index, n, out)
        return (
            self.head
            + self.tool_call(text, index, dumps(out.finish_reason), True)
            + self.running_tail(index + n)
        )

    def tool_call(self, text: bytes, index: int, finish: bytes, last: bool = False) -> bytes:
        """One ``delta.tool_calls`` fragment: id and name first, the arguments in pieces
        (a JSON object ``{"input": "<the answer words>"}`` once put together)."""
        args = text.decode() + ('"}' if last else "")
        call: dict[str, Any] = {"index": 0, "function": {"arguments": args}}
        if index <= self.reasoning_tokens:
            call = {
                "index": 0,
                "id": f"chatcmpl-tool-{self.rid}",
                "type": "function",
                "function": {"name": self.spec.tool_name, "arguments": '{"input": "' + args},
            }
        return b'{"index":0,"delta":{"tool_calls":%s},"logprobs":null,"finish_reason":%s}' % (
            dumps([call]),
            finish,
        )

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps({
            "id": self.id_prefix + self.rid, "object": "chat.completion", "created": self.created,
            "model": self.spec.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text.decode()},
                         "logprobs": None, "finish_reason": out.finish_reason, "stop_reason": None}],
            "usage": usage_dict(out),
        })  # fmt: skip


def llama_timings(out: Outcome) -> dict[str, Any]:
    n_prompt = max(out.prompt_tokens - out.cached_tokens, 0)
    n_pred = out.completion_tokens
    return {
        "cache_n": out.cached_tokens,
        "prompt_n": n_prompt,
        "prompt_ms": round(out.prefill_ms, 3),
        "prompt_per_token_ms": out.prefill_ms / n_prompt if n_prompt else 0.0,
        "prompt_per_second": 1000.0 * n_prompt / out.prefill_ms if out.prefill_ms else 0.0,
        "predicted_n": n_pred,
        "predicted_ms": round(out.decode_ms, 3),
        "predicted_per_token_ms": out.decode_ms / n_pred if n_pred else 0.0,
        "predicted_per_second": 1000.0 * n_pred / out.decode_ms if out.decode_ms else 0.0,
    }


def llama_error(status: int, message: str, kind: str = "invalid_request_error") -> bytes:
    return dumps({"error": {"code": status, "message": message, "type": kind}})


class LlamaCompletion(StreamFormat):
    """llama.cpp /v1/completions (key order as captured; usage always in the final chunk)."""

    object_name = b"text_completion"
    fixed_frame = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.meta = b'],"created":%d,"model":%s,"system_fingerprint":"b0-unknown","object":"%s"' % (
            self.created,
            dumps(self.spec.model),
            self.object_name,
        )
        self.id_part = b',"id":"chatcmpl-%s"' % self.rid.encode()
        self.tail = self.meta + self.id_part

    def token(self, text: bytes, index: int, n: int) -> bytes:
        return b'data: {"choices":[{"text":%s,"index":0,"logprobs":null,"finish_reason":null}%s}\n\n' % (
            json_str(text),
            self.tail,
        )

    def end(self, out: Outcome) -> bytes:
        return (
            b'data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":%s}%s,"usage":%s%s,"timings":%s}\n\n'
            % (
                dumps(out.finish_reason),
                self.meta,
                dumps(llama_usage(out)),
                self.id_part,
                dumps(llama_timings(out)),
            )
            + DONE
        )

    def error(self, message: str) -> bytes:
        return b"error: " + llama_error(500, message, "server_error") + b"\n\n"

    def malformed(self) -> bytes:
        return b'data: {"choices":[{"text":"\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps({
            "choices": [{"text": text.decode(), "index": 0, "logprobs": None, "finish_reason": out.finish_reason}],
            "created": self.created, "model": self.spec.model, "system_fingerprint": "b0-unknown",
            "object": "text_completion", "usage": llama_usage(out), "id": "chatcmpl-" + self.rid,
            "timings": llama_timings(out),
        })  # fmt: skip

    def server_timings(self, out: Outcome) -> dict[str, Any]:
        return llama_timings(out)


class LlamaChat(LlamaCompletion):
    """llama.cpp /v1/chat/completions: role chunk, content chunks, finish chunk, usage chunk."""

    object_name = b"chat.completion.chunk"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.tail = (
            b'],"created":%d,"id":"chatcmpl-%s","model":%s,"system_fingerprint":"b0-unknown","object":"chat.completion.chunk"'
            % (self.created, self.rid.encode(), dumps(self.spec.model))
        )

    def start(self) -> bytes:
        return (
            b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}%s}\n\n'
            % self.tail
        )

    def reasoning_chunk(self, text: bytes, index: int, n: int) -> bytes:
        return (
            b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":%s}}%s}\n\n'
            % (json_str(text), self.tail)
        )

    def token(self, text: bytes, index: int, n: int) -> bytes:
        return b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":%s}}%s}\n\n' % (
            json_str(text),
            self.tail,
        )

    def end(self, out: Outcome) -> bytes:
        fin = b'data: {"choices":[{"finish_reason":%s,"index":0,"delta":{}}%s}\n\n' % (
            dumps(out.finish_reason),
            self.tail,
        )
        if self.spec.include_usage:
            fin += b'data: {"choices":[%s,"usage":%s,"timings":%s}\n\n' % (
                self.tail,
                dumps(llama_usage(out)),
                dumps(llama_timings(out)),
            )
        return fin + DONE

    def malformed(self) -> bytes:
        return b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps({
            "choices": [{"finish_reason": out.finish_reason, "index": 0,
                         "message": {"role": "assistant", "content": text.decode()}}],
            "created": self.created, "model": self.spec.model, "system_fingerprint": "b0-unknown",
            "object": "chat.completion", "usage": llama_usage(out), "id": "chatcmpl-" + self.rid,
            "timings": llama_timings(out),
        })  # fmt: skip
