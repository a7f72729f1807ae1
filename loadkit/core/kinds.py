"""Request kinds: what one request asks of the server.

``chat`` is a streamed generation (text, images in content parts); ``embeddings`` and
``rerank`` are answered in one JSON body. A kind that is not streamed has no first token: its
figure is the latency (t_end − t_send, the request's E2E) and the latency per item (per input
embedded, per document ranked). Plugins add kinds (e.g. audio transcription) through the
``loadkit_register_kinds`` hook and serve them from their own adapters (docs/writing-a-plugin.md).

Public at ``loadkit.engines.base`` too (docs/api/public.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loadkit.types import GenerationRequest, Usage

CHAT = "chat"
EMBEDDINGS = "embeddings"
RERANK = "rerank"

# A plugin kind's scenario table builds its requests: (the table as parsed, the part's RNG) ->
# the engine-neutral request, with ``kind`` set and its fields in ``kind_fields``.
KindBuilder = Callable[[Mapping[str, Any], random.Random], "GenerationRequest"]


@dataclass(frozen=True, slots=True)
class RequestKind:
    """One kind of request.

    ``streaming``: answered as a token stream (TTFT, TPOT, ITL) or, False, in one body (latency).
    ``item``: what one unit of a request's batch is called in reports ("input", "document");
    a request's ``n_items`` counts them and the latency per item divides by it.
    ``keys``/``build``: a plugin kind's scenario keys (beside ``kind`` and ``weight`` in a
    ``[[parts]]`` entry) and the function that turns them into a request; None for built-ins,
    whose syntax loadkit's workload owns.
    """

    name: str
    streaming: bool
    item: str = "request"
    description: str = ""
    keys: tuple[str, ...] = ()
    build: KindBuilder | None = None


BUILTIN_KINDS: tuple[RequestKind, ...] = (
    RequestKind(CHAT, streaming=True, item="request", description="chat and text completions, streamed"),
    RequestKind(EMBEDDINGS, streaming=False, item="input", description="embeddings of one or several inputs"),
    RequestKind(RERANK, streaming=False, item="document", description="a query's documents scored"),
)


@dataclass(slots=True)
class BodyResult:
    """What an adapter made of a non-streamed kind's whole response body.

    ``items``: the answers it holds (embeddings, scored documents); the request is ``ok`` only
    when it equals the items sent. ``usage``: the server's token counts where it sent them.
    ``error``: an error object inside a 200 body (outcome ``in_band_error``).
    """

    items: int | None = None
    usage: Usage | None = None
    error: str | None = None
    server_timings: dict[str, Any] | None = None


class BodyParser:
    """Parses one non-streamed answer. Raise loadkit.types.MalformedEvent when the body is not
    the kind's answer (outcome ``malformed_stream``, the error naming what was wrong).

    ``honours_top_n``: False for an API that scores every document whatever the request's
    ``top_n`` (TEI's /rerank): the answers due are then one per item sent.
    """

    honours_top_n = True

    def parse_body(self, body: bytes, headers: Mapping[str, str]) -> BodyResult:
        raise NotImplementedError
