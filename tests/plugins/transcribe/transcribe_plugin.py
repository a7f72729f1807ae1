"""A test plugin adding a request kind: audio transcription, end to end.

- the kind ``transcription`` (``loadkit_register_kinds``): not streamed, one item per second of
  audio (its latency per item is the time per second of audio); a scenario part's ``seconds``
  key ([lo, hi] or one number) gives each request's clip length;
- the engine ``transcribe`` (``loadkit_register_engines``): an OpenAI-compatible adapter that
  also sends ``/v1/audio/transcriptions`` as JSON (the clip a base64 WAV in ``file``) and reads
  ``{"text", "usage": {"type": "duration", "seconds"}}``: the seconds the server heard are the
  items it answered;
- the simulator protocol ``transcribe`` (``loadkit_register_sim_protocols``): reads the WAV's
  length and charges 50 prompt tokens per second of audio (an encoder's frames), prefilled in
  the shared batch like any kind answered in one body.
"""

from __future__ import annotations

import base64
import io
import math
import wave
from typing import Any

import orjson

from loadkit import hookimpl
from loadkit.engines.base import BodyParser, BodyResult, RequestKind
from loadkit.engines.openai import OpenAIAdapter
from loadkit.sim.protocols import GenRoute, KindFormat, Outcome, RequestSpec, SimProtocol, dumps
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, Usage

TRANSCRIPTION = "transcription"
PATH = "/v1/audio/transcriptions"
RATE = 8000  # Hz, 16-bit mono: a second of audio is 16 kB on the wire
TOKENS_PER_SECOND = 50


def wav_of(seconds: int) -> bytes:
    """``seconds`` of silence as a WAV file (what the server decodes, not what it hears)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(b"\0\0" * RATE * seconds)
    return out.getvalue()


def build(table: Any, rng: Any) -> GenerationRequest:
    """A scenario part's request: ``seconds`` = [lo, hi] (uniform) or one number."""
    seconds = table.get("seconds", [1, 3])
    if isinstance(seconds, list):
        seconds = rng.randint(int(seconds[0]), int(seconds[1]))
    seconds = int(seconds)
    if seconds < 1:
        raise ValueError(f"seconds must be >= 1, got {seconds}")
    return GenerationRequest(kind=TRANSCRIPTION, kind_fields={"seconds": seconds}, n_items=seconds,
                             label=str(table.get("label", TRANSCRIPTION)))  # fmt: skip


KIND = RequestKind(TRANSCRIPTION, streaming=False, item="second",
                   description="audio transcribed, per second of audio", keys=("seconds",), build=build)  # fmt: skip


class TranscriptionParser(BodyParser):
    def parse_body(self, body: bytes, headers: Any) -> BodyResult:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise MalformedEvent(f"transcription answer is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise MalformedEvent(f"transcription answer is not an object: {body[:80]!r}")
        if obj.get("error") is not None:
            err = obj["error"]
            return BodyResult(error=str(err.get("message") if isinstance(err, dict) else err))
        if not isinstance(obj.get("text"), str):
            raise MalformedEvent(f"transcription answer has no 'text': {body[:80]!r}")
        usage = obj.get("usage") or {}
        seconds = usage.get("seconds") if usage.get("type") == "duration" else None
        tokens = usage.get("input_tokens") if usage.get("type") == "tokens" else None
        return BodyResult(items=math.ceil(seconds) if isinstance(seconds, int | float) else None,
                          usage=Usage(prompt_tokens=tokens) if isinstance(tokens, int) else None)  # fmt: skip


class TranscribeAdapter(OpenAIAdapter):
    name = "transcribe"
    description = "OpenAI-compatible, with audio transcription (a test plugin's kind)"
    kind_paths = {**OpenAIAdapter.kind_paths, TRANSCRIPTION: PATH}

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        if request.kind != TRANSCRIPTION:
            return super().build_request(request)
        audio = wav_of(int(request.kind_fields["seconds"]))
        body = {"model": self.options.model or "default", "response_format": "json",
                "file": base64.b64encode(audio).decode()}  # fmt: skip
        return HttpRequest(
            "POST", PATH, orjson.dumps(body), {**self.base_headers(), "Accept": "application/json"}
        )

    def new_body_parser(self, request: GenerationRequest) -> BodyParser:
        if request.kind == TRANSCRIPTION:
            return TranscriptionParser()
        return super().new_body_parser(request)


# ---- the simulator's side ---------------------------------------------------------------


def parse_transcription(body: dict[str, Any], default_max: int, model: str) -> RequestSpec:
    try:
        audio = base64.b64decode(body["file"], validate=True)
        with wave.open(io.BytesIO(audio)) as w:
            seconds = math.ceil(w.getnframes() / w.getframerate())
    except (KeyError, TypeError, ValueError, EOFError, wave.Error) as exc:
        raise ValueError(f"'file' must be a base64 WAV file: {exc}") from None
    if seconds < 1:
        raise ValueError("'file' holds no audio")
    ids = [i % 4096 for i in range(TOKENS_PER_SECOND * seconds)]
    return RequestSpec("", 1, False, str(body.get("model") or model), exact=True, prompt_ids=ids,
                       cache_prompt=False, kind=TRANSCRIPTION, item_tokens=[TOKENS_PER_SECOND] * seconds)  # fmt: skip


class TranscriptionAnswer(KindFormat):
    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps(
            {"text": "silence " * self.items(), "usage": {"type": "duration", "seconds": self.items()}}
        )


def error_body(status: int, message: str) -> bytes:
    return dumps({"error": {"message": message, "type": "invalid_request_error", "code": status}})


PROTOCOL = SimProtocol("transcribe", {PATH: GenRoute(parse_transcription, TranscriptionAnswer, error_body)},
                       description="OpenAI audio transcriptions (a test plugin)")  # fmt: skip


@hookimpl
def loadkit_register_kinds(register):
    register(KIND)


@hookimpl
def loadkit_register_engines(register):
    register(TranscribeAdapter)


@hookimpl
def loadkit_register_sim_protocols(register):
    register(PROTOCOL)
