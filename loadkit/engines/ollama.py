"""Ollama: ``/api/generate`` (api ``native``) and ``/api/chat`` (api ``chat``), streamed as
newline-delimited JSON, not SSE.

Each line: ``{"model", "created_at", "response": "..."}`` (generate) or ``{"message": {"role",
"content", "thinking"?}}`` (chat), with ``"done": false``; Ollama streams one token per line.
``thinking`` (models run with ``think``) is reasoning text; ``message.tool_calls`` carries
whole tool calls (name and an arguments object), one line each. The last line has ``"done": true``,
``done_reason``, ``prompt_eval_count`` (prompt tokens actually evaluated: a prefix reused from
the cache is left out, and the cached count itself is not reported), ``eval_count`` (output
tokens) and durations in nanoseconds, passed through as server_timings. ``{"error": "..."}``
is an in-band error. Exact output: ``options.num_predict`` caps the output, but Ollama has no
``ignore_eos``, so a request can stop early (n_out recorded from ``eval_count``). Metrics:
Ollama exposes no Prometheus endpoint. ``AdapterOptions.model`` must name a pulled model.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from loadkit.core.adapter import AdapterOptions, StreamParser
from loadkit.core.channels import ANSWER, REASONING, TOOL, ChannelMarks
from loadkit.core.kinds import CHAT
from loadkit.engines.common import AdapterExtras, int_or_none, load_object
from loadkit.engines.kinds import OLLAMA_KINDS, KindRequests, KindWire, paths_of
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent, Usage

DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")
# Passed through as server_timings: the durations and the token counts they were spent on.
TIMING_KEYS = (*DURATIONS, "prompt_eval_count", "eval_count")


class OllamaParser(StreamParser):
    __slots__ = ("chat", "marks")

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.marks = ChannelMarks()

    def bind_channels(self, events: list[int], options: AdapterOptions) -> ChannelMarks:
        self.marks.events = events
        return self.marks

    def see(self, text: str, thinking: str, calls: Any) -> int:
        """Mark channel changes (reasoning, answer, tool calls in that order); tool calls make
        the line a token event (Ollama sends each call whole, in one line)."""
        marks = self.marks
        if thinking and marks.current != REASONING:
            marks.switch(REASONING)
        if text and marks.current != ANSWER:
            marks.switch(ANSWER)
        if not calls:
            return 0
        if not isinstance(calls, list):
            raise MalformedEvent(f"Ollama message.tool_calls is not a list: {str(calls)[:120]!r}")
        for i, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict):
                raise MalformedEvent(f"Ollama tool call has no function object: {str(call)[:120]!r}")
            args = fn.get("arguments")
            args_text = args if isinstance(args, str) else orjson.dumps(args or {}).decode()
            index = fn.get("index", len(marks.tools().calls) + i)
            marks.tools().add(
                index if isinstance(index, int) else i, call.get("id"), fn.get("name"), args_text
            )
        if marks.current != TOOL:
            marks.switch(TOOL)
        return 1

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        obj = load_object(data)
        if "error" in obj:
            return TokenEvent(error=str(obj["error"]))
        if not isinstance(obj.get("done"), bool):
            raise MalformedEvent(f"Ollama line has no boolean 'done': {data[:120]!r}")
        text, thinking = self.texts(obj, data)
        source = obj.get("message") if self.chat else obj
        tool = self.see(text, thinking, source.get("tool_calls") if isinstance(source, dict) else None)
        k = 1 if (text or thinking or tool) else 0
        if not obj["done"]:
            return TokenEvent(tokens=k, text=text, reasoning_text=thinking)
        usage = Usage(
            prompt_tokens=int_or_none(obj.get("prompt_eval_count")),
            completion_tokens=int_or_none(obj.get("eval_count")),
        )
        timings = {key: obj[key] for key in TIMING_KEYS if key in obj}
        return TokenEvent(
            tokens=k,
            text=text,
            reasoning_text=thinking,
            done=True,
            usage=usage,
            finish_reason=obj.get("done_reason"),
            server_timings=timings or None,
        )

    def texts(self, obj: dict[str, Any], data: str) -> tuple[str, str]:
        source: Any = obj.get("message") if self.chat else obj
        if not isinstance(source, dict):
            raise MalformedEvent(f"Ollama chat line has no message object: {data[:120]!r}")
        text = source.get("content" if self.chat else "response")
        thinking = source.get("thinking") or ""
        if not isinstance(text, str) or not isinstance(thinking, str):
            raise MalformedEvent(f"Ollama line has no text field: {data[:120]!r}")
        return text, thinking


class OllamaAdapter(KindRequests, AdapterExtras):
    name = "ollama"
    description = "Ollama: /api/generate and /api/chat, newline-delimited JSON"
    framing = "ndjson"
    apis = ("native", "chat")
    info_paths = ("/api/version", "/api/tags")
    # /api/embed; Ollama has no rerank endpoint (engines/kinds.py).
    kind_wires: ClassVar[dict[str, KindWire]] = OLLAMA_KINDS
    kind_paths: ClassVar[dict[str, str]] = paths_of(OLLAMA_KINDS)
    metrics_path: ClassVar[str | None] = None

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        if request.kind != CHAT:
            return self.kind_request(request)
        body: dict[str, Any] = {
            "model": self.options.model or "default",
            "stream": True,
            "options": {"num_predict": request.max_tokens},
        }
        if self.api == "chat":
            body["messages"] = request.as_messages()
        else:
            body["prompt"] = request.as_prompt()
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        path = "/api/chat" if self.api == "chat" else "/api/generate"
        return HttpRequest("POST", path, orjson.dumps(body), self.base_headers())

    def new_parser(self) -> StreamParser:
        return OllamaParser(chat=self.api == "chat")

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {}
        version = responses.get("/api/version")
        if isinstance(version, dict) and version.get("version"):
            info["engine_version"] = version["version"]
        tags = responses.get("/api/tags")
        if isinstance(tags, dict) and isinstance(tags.get("models"), list) and tags["models"]:
            first = tags["models"][0]
            if isinstance(first, dict) and first.get("name"):
                info["model"] = self.options.model or first["name"]
        return info
