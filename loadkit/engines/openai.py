"""The generic OpenAI-compatible adapter: /v1/completions and /v1/chat/completions, streaming.

First token = first chunk with non-empty content, text, reasoning text or a tool-call fragment
(a role-only chunk is not a token). Normal end = ``data: [DONE]``; a body that closes cleanly after a chunk with a
``finish_reason`` or after the usage-only chunk (``choices: []``) ended normally too (many
servers send no ``[DONE]``): outcome ok, ``end`` "close". Usage comes from the final chunk when the server
honours ``stream_options.include_usage``. An ``error`` object inside the stream is an in-band
error. Engines built on this API (vLLM, SGLang, TensorRT-LLM, llama.cpp) subclass it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from loadkit.core.adapter import AdapterOptions, EngineAdapter, StreamParser
from loadkit.core.channels import ANSWER, REASONING, TOOL, ChannelMarks
from loadkit.core.kinds import CHAT
from loadkit.engines.channels import ThinkTags
from loadkit.engines.common import load_object
from loadkit.engines.kinds import OPENAI_KINDS, KindRequests, KindWire, paths_of
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent, Usage

_loads = orjson.loads  # bound once: parse runs for every token event


def parse_openai_usage(raw: Any) -> Usage | None:
    """Usage object of the OpenAI API, with cached and reasoning tokens where given."""
    if not isinstance(raw, dict):
        return None
    details = raw.get("prompt_tokens_details") or {}
    out_details = raw.get("completion_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    reasoning = out_details.get("reasoning_tokens") if isinstance(out_details, dict) else None
    # image_tokens: the field OpenAI-compatible gateways (and loadkit's simulator) report;
    # vLLM and SGLang count image tokens in prompt_tokens without saying how many.
    images = details.get("image_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=_int_or_none(raw.get("prompt_tokens")),
        completion_tokens=_int_or_none(raw.get("completion_tokens")),
        cached_tokens=_int_or_none(cached),
        reasoning_tokens=_int_or_none(reasoning),
        image_tokens=_int_or_none(images),
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def in_band_error_message(obj: dict[str, Any]) -> str | None:
    err = obj.get("error")
    if err is None:
        return None
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err)


class OpenAIStreamParser(StreamParser):
    """Parses chat.completion.chunk and text_completion chunks.

    Channels: ``delta.content`` (or ``text``) is the answer, ``delta.reasoning_content``
    (vLLM before 0.19.1, SGLang, DeepSeek, llama.cpp) or ``delta.reasoning`` (vLLM since
    0.19.1, OpenRouter) is reasoning, ``delta.tool_calls`` fragments are tool calls; with
    ``--think-tags`` ``<think>...</think>`` inside the answer text is reasoning.
    """

    __slots__ = ("chat", "usage_chunk_seen", "marks", "tags")

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.usage_chunk_seen = False
        self.marks = ChannelMarks()
        self.tags: ThinkTags | None = None

    def end_seen(self) -> bool:
        """The usage-only chunk (``choices: []``) is by the API the last before ``[DONE]``."""
        return self.usage_chunk_seen

    def bind_channels(self, events: list[int], options: AdapterOptions) -> ChannelMarks:
        self.marks.events = events
        if options.option("think_tags"):
            self.tags = ThinkTags()
        return self.marks

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        if data == "[DONE]":
            return TokenEvent(done=True)
        try:  # load_object inlined for the common case: this runs for every token event
            obj = _loads(data)
        except orjson.JSONDecodeError:
            obj = load_object(data)  # raises MalformedEvent naming what was wrong
        if type(obj) is not dict:
            obj = load_object(data)  # likewise
        if "error" in obj:
            err = in_band_error_message(obj)
            if err is not None:
                return TokenEvent(error=err)
        return self.chunk_event(obj)

    def chunk_event(self, obj: dict[str, Any]) -> TokenEvent:
        choices = obj.get("choices")
        if choices is None and "usage" not in obj:
            raise MalformedEvent(f"chunk has neither choices nor usage: {str(obj)[:120]!r}")
        usage = obj.get("usage")  # absent or null on every chunk but (maybe) the last
        if usage is not None:
            usage = parse_openai_usage(usage)
        text, finish = "", None
        if choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                raise MalformedEvent(f"choice is not an object: {choice!r}")
            finish = choice.get("finish_reason")
            if self.chat:
                delta = choice.get("delta") or {}
                text = delta.get("content") or ""
                if not text or self.tags is not None:  # reasoning, tool calls, role/finish chunks
                    return self.channel_event(delta, text, usage, finish, obj.get("timings"))
            else:
                text = choice.get("text") or ""
                if text and self.tags is not None:
                    return self.channel_event({}, text, usage, finish, obj.get("timings"))
            if text and self.marks.current != ANSWER:  # one comparison per plain token
                self.marks.switch(ANSWER)
        elif usage is not None:
            self.usage_chunk_seen = True  # the final usage chunk; off the per-token branch
        # Positional: this runs for every token event (fields: tokens, text, reasoning_text,
        # done, usage, error, finish_reason, server_timings).
        return TokenEvent(1 if text else 0, text, "", False, usage, None, finish, obj.get("timings"))

    def channel_event(self, delta: dict[str, Any], text: str, usage: Usage | None, finish: str | None,
                      timings: Any) -> TokenEvent:  # fmt: skip
        """A chunk off the plain-answer path: reasoning, tool-call fragments, tagged text."""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        if not isinstance(reasoning, str):
            raise MalformedEvent(f"delta reasoning is not a string: {str(delta)[:120]!r}")
        if reasoning:
            self.see(REASONING)
        held = False
        if text and self.tags is not None:
            reasoning, text, held = self.split_tags(reasoning, text)
        elif text:
            self.see(ANSWER)
        calls = delta.get("tool_calls")
        if calls:
            self.tool_fragments(calls)
            self.see(TOOL)
        k = 1 if (text or reasoning or calls or held) else 0
        return TokenEvent(k, text, reasoning, False, usage, None, finish, timings)

    def see(self, channel: int) -> None:
        if self.marks.current != channel:
            self.marks.switch(channel)

    def split_tags(self, reasoning: str, text: str) -> tuple[str, str, bool]:
        """(reasoning, answer, True): the text cut at think tags. The event is a token even when
        all of its text is held back (a tag's first characters)."""
        assert self.tags is not None
        answer = []
        for channel, piece in self.tags.split(text):
            if (
                channel == REASONING
                and not piece
                and self.tags.opened_before
                and self.marks.current != REASONING
            ):
                self.marks.switch(REASONING, back=1)  # the tag began in the previous event
            self.see(channel)
            if channel == REASONING:
                reasoning += piece
            else:
                answer.append(piece)
        return reasoning, "".join(answer), True

    def tool_fragments(self, calls: Any) -> None:
        """``delta.tool_calls``: [{index, id?, type?, function: {name?, arguments?}}]."""
        if not isinstance(calls, list):
            raise MalformedEvent(f"delta.tool_calls is not a list: {str(calls)[:120]!r}")
        tools = self.marks.tools()
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            index = call.get("index", 0) if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(index, int):
                raise MalformedEvent(
                    f"tool call fragment needs an index and a function object: {str(call)[:120]!r}"
                )
            args = fn.get("arguments") or ""
            if not isinstance(args, str):  # a few servers send the object itself
                args = orjson.dumps(args).decode()
            tools.add(index, call.get("id"), fn.get("name"), args)


class OpenAIAdapter(KindRequests, EngineAdapter):
    name = "openai"
    description = "Generic OpenAI-compatible API: /v1/chat/completions and /v1/completions (SSE)"
    apis: ClassVar[tuple[str, ...]] = ("chat", "completions")
    image_apis: ClassVar[tuple[str, ...]] = ("chat",)  # content parts with image_url, passed through
    # /v1/embeddings and Jina/Cohere-style /v1/rerank (loadkit/engines/kinds.py); engines that
    # lack one say so with their own tables.
    kind_wires: ClassVar[dict[str, KindWire]] = OPENAI_KINDS
    kind_paths: ClassVar[dict[str, str]] = paths_of(OPENAI_KINDS)
    info_paths: ClassVar[tuple[str, ...]] = ("/v1/models",)
    chat_path: ClassVar[str] = "/v1/chat/completions"
    completions_path: ClassVar[str] = "/v1/completions"

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        if request.kind != CHAT:
            return self.kind_request(request)
        body = self.request_body(request)
        path = self.chat_path if self.api == "chat" else self.completions_path
        return HttpRequest("POST", path, orjson.dumps(body), self.base_headers())

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.options.model or "default",
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.api == "chat":
            body["messages"] = request.as_messages()
        else:
            body["prompt"] = request.as_prompt()
        body.update(self.exact_output_fields(request))
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        return body

    def exact_output_fields(self, request: GenerationRequest) -> dict[str, Any]:
        """Fields that make the engine generate exactly max_tokens. Plain OpenAI has none."""
        return {}

    def new_parser(self) -> StreamParser:
        return OpenAIStreamParser(chat=self.api == "chat")

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        models = responses.get("/v1/models")
        if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
            return {"model": models["data"][0].get("id")}
        return {}
