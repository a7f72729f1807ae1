"""The request's bytes and its send time (write start → last byte handed to the kernel), and a
request's images carried into its record (issue 34: the upload of a multi-megabyte request is
part of TTFT, so it is reported on its own)."""

from __future__ import annotations

import orjson

from loadkit import types as t
from loadkit.client.timer import run_request
from loadkit.engines.base import AdapterOptions
from loadkit.engines.vllm import VLLMAdapter
from loadkit.records import RequestRecord
from tests.helpers.openai_chunks import DONE, delta
from tests.helpers.scripted_server import END_CHUNK, Script, ScriptedServer

URL = "data:image/png;base64," + "A" * (4 << 20)  # 4 MiB of data URL: the upload takes a while


def image_request() -> t.GenerationRequest:
    parts = [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": URL}}]
    return t.GenerationRequest(messages=[{"role": "user", "content": parts}], max_tokens=2,
                               image_count=1, image_pixels=640 * 480, image_tokens_expected=391)  # fmt: skip


def test_request_bytes_send_time_and_images_are_recorded():
    with ScriptedServer(lambda _req: Script(writes=[(0, delta("a")), (0, DONE), (0, END_CHUNK)])) as srv:
        rec = run_request(VLLMAdapter(AdapterOptions(model="m")), srv.url, image_request())
        sent = srv.requests[0]
    assert rec.outcome == t.OK, rec.error
    assert rec.request_bytes == len(sent) > 4 << 20
    body = orjson.loads(sent.split(b"\r\n\r\n", 1)[1])
    assert body["messages"][0]["content"][1]["image_url"]["url"] == URL  # passed through as parts
    assert (
        rec.t_sent_ns is not None and rec.t_send_ns < rec.t_sent_ns <= rec.t_headers_ns <= rec.event_t_ns[0]
    )
    assert (rec.image_count, rec.image_pixels, rec.image_tokens_expected) == (1, 640 * 480, 391)
    line = rec.to_json()
    assert line["request_bytes"] == len(sent) and line["image_count"] == 1
    assert line["send_ms"] == (rec.t_sent_ns - rec.t_send_ns) / 1e6 > 0


def test_a_request_never_written_has_no_send_time():
    rec = run_request(VLLMAdapter(), "http://127.0.0.1:9", t.GenerationRequest(prompt="x"))
    assert rec.outcome == t.CONNECT_ERROR
    assert rec.t_sent_ns is None and RequestRecord.to_json(rec)["send_ms"] is None
