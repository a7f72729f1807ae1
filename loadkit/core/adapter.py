"""The engine adapter contract every built-in and third-party engine implements.

Public at ``loadkit.engines.base`` and ``loadkit.engines.common`` too (re-exports, no warning:
plugins import it from there; docs/api/public.md).

An adapter owns everything engine-specific: the URL and body of a request, how one stream
message maps to tokens, what counts as the first token and the normal end, in-band errors,
usage fields, and which server endpoints and metrics are worth asking for. The stream timer
(loadkit.client.timer) owns the socket and the clock; it never looks inside a message itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import orjson

from loadkit.core.channels import ChannelMarks
from loadkit.core.kinds import CHAT, BodyParser
from loadkit.types import GenerationRequest, HttpRequest, TokenEvent

Framing = Literal["sse", "ndjson"]


@dataclass(slots=True)
class AdapterOptions:
    """Per-target settings an adapter is built with.

    ``api`` picks the endpoint family where an engine has several ("chat", "completions",
    "native"); ``None`` means the adapter's default. ``api_key`` is a secret: adapters put it
    in a header and nowhere else.

    ``run_options`` holds every option of the run by its argparse ``dest`` (Locust's, loadkit's
    and those plugins add through ``loadkit_add_arguments``), read-only, with the values the
    node received (workers get the master's). It is empty where there is no Locust run (unit
    tests, ``loadkit.client.timer.run_request`` called directly); read it with :meth:`option`.
    """

    model: str | None = None
    api: str | None = None
    api_key: str | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    extra_headers: dict[str, str] = field(default_factory=dict)
    run_options: Mapping[str, Any] = field(default_factory=dict)

    def option(self, dest: str, default: Any = None) -> Any:
        """The run's option ``dest`` (e.g. ``"anthropic_version"``); ``default`` when unset or None."""
        value = self.run_options.get(dest)
        return default if value is None else value

    def __repr__(self) -> str:  # never print the key
        key = "***" if self.api_key else None
        return f"AdapterOptions(model={self.model!r}, api={self.api!r}, api_key={key!r})"


class StreamParser:
    """Per-request parsing state. One instance per request, fed messages in arrival order."""

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        """Turn one message into a TokenEvent.

        ``data`` is an SSE event's data (or one NDJSON line); ``event`` its SSE event name.
        Return None for messages that carry nothing (comments, keep-alives). Raise
        loadkit.types.MalformedEvent when the message cannot be understood.
        """
        raise NotImplementedError

    def bind_channels(self, events: list[int], options: AdapterOptions) -> ChannelMarks | None:
        """Called once before the first message with the record's arrival list: a parser that
        tells reasoning, answer and tool calls apart returns its ChannelMarks (see
        loadkit.core.channels); None (the default) leaves the channel metrics unmeasured."""
        return None

    def end_seen(self) -> bool:
        """Called once, when the body closed cleanly without ``done``: True if the messages
        seen end the stream as the protocol's last message would (OpenAI's usage-only chunk),
        so the close is a normal end. A chunk with a ``finish_reason`` counts already; say
        nothing here that needs work on every message."""
        return False


class EngineAdapter:
    """Base class for engine adapters; subclass and register via `loadkit_register_engines`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    framing: ClassVar[Framing] = "sse"
    # Endpoint families this adapter can speak; the first is the default.
    apis: ClassVar[tuple[str, ...]] = ("chat",)
    # Prometheus metric names worth scraping, mapped to loadkit's neutral names
    # (running, waiting, kv_usage, prefix_hit_rate, ...).
    metric_names: ClassVar[dict[str, str]] = {}
    # Paths that identify this engine (for --engine auto) and describe the server.
    info_paths: ClassVar[tuple[str, ...]] = ()
    # True for engines with no end marker, whose clean close of the body is the normal end
    # (Triton's generate_stream). Otherwise a clean close without `done` is `ok` (end "close")
    # after a finish_reason or the parser's `end_seen()`, else `incomplete`.
    end_on_close: ClassVar[bool] = False
    # Where a tenant's priority goes unless the target says (loadkit/core/priority.py): vLLM's body field.
    priority_as: ClassVar[str] = "field:priority"
    # The apis on which this adapter sends images (OpenAI content parts with image_url); a run
    # whose scenario has [images] refuses a target whose api is not one (docs/engines.md).
    image_apis: ClassVar[tuple[str, ...]] = ()
    # The request kinds (loadkit.core.kinds) this adapter serves beyond chat, each with the path
    # it goes to on this engine (e.g. {"embeddings": "/v1/embeddings", "rerank": "/v1/rerank"}).
    # A run whose workload sends a kind the target's adapter does not list is refused at start.
    kind_paths: ClassVar[dict[str, str]] = {}

    def __init__(self, options: AdapterOptions | None = None) -> None:
        self.options = options or AdapterOptions()
        api = self.options.api or self.apis[0]
        if api not in self.apis:
            raise ValueError(f"engine {self.name!r} has no api {api!r}; choose one of {', '.join(self.apis)}")
        self.api = api

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        raise NotImplementedError

    def new_parser(self) -> StreamParser:
        raise NotImplementedError

    def serves(self, kind: str) -> bool:
        """True if this adapter can send requests of ``kind`` (chat: always)."""
        return kind == CHAT or kind in self.kind_paths

    def new_body_parser(self, request: GenerationRequest) -> BodyParser:
        """The parser of a non-streamed kind's whole answer (``request.kind`` is in kind_paths);
        ``build_request`` builds such a request from the same GenerationRequest."""
        raise NotImplementedError(f"engine {self.name!r} has no body parser for kind {request.kind!r}")

    def base_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": self.accept}
        if self.options.api_key:
            headers["Authorization"] = f"Bearer {self.options.api_key}"
        headers.update(self.options.extra_headers)
        return headers

    @property
    def accept(self) -> str:
        return "text/event-stream" if self.framing == "sse" else "application/x-ndjson"

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        """Engine version and model from the bodies of `info_paths` (parsed JSON or text)."""
        return {}


class AdapterExtras(EngineAdapter):
    """Optional capabilities beyond the base contract, with "not offered" defaults.

    ``metrics_path`` is where the Prometheus text lives (None: the engine exposes none).
    ``end_on_close``: the engine has no end marker and closing the stream is its normal end
    (Triton's generate_stream); the timer honours it where supported.
    ``tokenize_request`` / ``parse_tokenize``: the server's own tokenizer, the one path every
    server-side token count takes (loadkit/servers/info.py: ``tokenize``; used by the
    scenarios' ``tokenizer = "server"``, loadkit/workload/servertok.py).
    """

    metrics_path: ClassVar[str | None] = "/metrics"
    end_on_close: ClassVar[bool] = False

    def tokenize_request(self, text: str) -> HttpRequest | None:
        """The request that asks the server to tokenize ``text`` (no special tokens added:
        the count is of the text alone); None when it cannot."""
        return None

    def parse_tokenize(self, body: Any) -> int | None:
        """Token count from the tokenize endpoint's parsed JSON response."""
        return None

    def json_request(self, path: str, body: dict[str, Any]) -> HttpRequest:
        headers = {k: v for k, v in self.base_headers().items() if k != "Accept"}
        return HttpRequest("POST", path, orjson.dumps(body), headers)
