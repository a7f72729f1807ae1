"""The simulator charges prefill for a chat request's images (Qwen2-VL's tokens by resolution,
loadkit/imagetokens.py), counts them in prompt_tokens, reports them as
prompt_tokens_details.image_tokens and records them in the truth log (sim/images.py)."""

from __future__ import annotations

import orjson
import pytest

from loadkit import types as t
from loadkit.client import timer
from loadkit.engines.base import AdapterOptions
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.imagetokens import image_tokens
from loadkit.sim import testing as sim_testing
from loadkit.sim.images import image_parts, image_token_ids
from loadkit.workload.images import data_url, synthetic_png_or_jpeg
from tests.sim.rawclient import request

TIMEOUTS = timer.Timeouts(connect_s=2, first_token_s=5, total_s=10)
SIZES = ((640, 480, "png"), (1500, 1000, "jpeg"))


def chat(images: list[str], text: str = "describe") -> t.GenerationRequest:
    parts = [{"type": "text", "text": text}] + [
        {"type": "image_url", "image_url": {"url": u}} for u in images
    ]
    return t.GenerationRequest(messages=[{"role": "user", "content": parts}], max_tokens=3)


def urls(sizes=SIZES) -> list[str]:
    return [data_url(synthetic_png_or_jpeg(1, w, h, fmt, 80), fmt) for w, h, fmt in sizes]


@pytest.mark.parametrize(("family", "adapter"), [("openai", VLLMAdapter), ("llamacpp", LlamaCppAdapter)])
def test_image_tokens_are_charged_reported_and_in_the_truth_log(tmp_path, family, adapter):
    log = str(tmp_path / "truth.jsonl")
    expected = sum(image_tokens(w, h) for w, h, _ in SIZES)
    with sim_testing.sim_thread(family=family, profile="fast", truth_log=log) as sim:
        engine = adapter(AdapterOptions(model="sim-fast", api="chat"))
        plain = timer.run_request(engine, sim.url, chat([]), timeouts=TIMEOUTS)
        with_images = timer.run_request(engine, sim.url, chat(urls()), timeouts=TIMEOUTS)
        sim.wait_truth(2)
    assert plain.outcome == with_images.outcome == t.OK, (plain.error, with_images.error)
    assert plain.image_tokens is None
    assert with_images.image_tokens == expected == 391 + 43 * 29  # 1500 x 1000: scaled to 1204 x 812
    assert with_images.n_in == plain.n_in + expected  # same text: the images' tokens on top
    truth = {r["request_id"]: r for r in map(orjson.loads, open(log))}
    row = truth[with_images.request_id]
    assert row["image_tokens"] == expected and row["prompt_tokens"] == with_images.n_in
    assert truth[plain.request_id]["image_tokens"] == 0


def test_the_same_image_is_the_same_tokens_and_another_is_not():
    a, b = urls(((300, 300, "png"), (300, 300, "jpeg")))
    ids_a = image_token_ids(image_parts([{"role": "user", "content": chat([a]).messages[0]["content"]}]))
    again = image_token_ids(image_parts(chat([a]).messages))
    other = image_token_ids(image_parts(chat([b]).messages))
    assert ids_a == again and len(ids_a) == image_tokens(300, 300)
    assert len(other) == len(ids_a) and set(other).isdisjoint(ids_a)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/cat.png", "expected a data URL"),
        ("data:image/png,rawbytes", "expected a base64 data URL"),
        ("data:image/png;base64,@@@", "does not decode"),
        ("data:image/png;base64,aGVsbG8=", "not an image"),
    ],
)
def test_bad_image_parts_get_a_400_naming_the_field(url, message):
    with sim_testing.sim_thread(profile="fast") as sim:
        body = {"model": "m", "max_tokens": 2, "messages": chat([url]).messages}
        resp = request(sim.port, "POST", "/v1/chat/completions", body)
    assert resp.status == 400
    assert message in resp.json()["error"]["message"] and "image_url.url" in resp.json()["error"]["message"]


class _ImageServer:
    """A real HTTP server on loopback serving one PNG at /img/a.png, counting its GETs."""

    def __init__(self, data: bytes) -> None:
        import http.server
        import threading

        outer = self
        self.gets: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                outer.gets.append(self.path)
                if self.path != "/img/a.png":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _ImageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_an_image_url_is_fetched_charged_and_its_fetch_time_logged(tmp_path):
    log = str(tmp_path / "truth.jsonl")
    png = synthetic_png_or_jpeg(2, 560, 420, "png", 80)
    with _ImageServer(png) as images, sim_testing.sim_thread(profile="fast", truth_log=log) as sim:
        engine = VLLMAdapter(AdapterOptions(model="sim-fast", api="chat"))
        url = images.url + "/img/a.png"
        got = timer.run_request(engine, sim.url, chat([url, url]), timeouts=TIMEOUTS)
        inline = timer.run_request(engine, sim.url, chat([data_url(png, "png")] * 2), timeouts=TIMEOUTS)
        sim.wait_truth(2)
    assert got.outcome == inline.outcome == t.OK, got.error
    assert got.image_tokens == inline.image_tokens == 2 * image_tokens(560, 420)
    assert images.gets == ["/img/a.png"]  # the same URL twice in one request: fetched once
    truth = {r["request_id"]: r for r in map(orjson.loads, open(log))}
    row = truth[got.request_id]
    assert row["image_fetches"] == 1 and 0 < row["image_fetch_ms"] < 5000 and row["image_count"] == 2
    assert "image_fetches" not in truth[inline.request_id]


@pytest.mark.parametrize(
    ("path", "message"),
    [("/img/missing.png", "HTTP 404"), (None, "Connection refused")],
)
def test_a_failed_image_fetch_is_a_400_naming_the_url(tmp_path, path, message):
    log = str(tmp_path / "truth.jsonl")
    with _ImageServer(b"") as images, sim_testing.sim_thread(profile="fast", truth_log=log) as sim:
        if path is None:  # nothing listens there any more
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{s.getsockname()[1]}/img/a.png"
        else:
            url = images.url + path
        body = {"model": "m", "max_tokens": 2, "messages": chat([url]).messages}
        resp = request(sim.port, "POST", "/v1/chat/completions", body)
        sim.wait_truth(1)
    assert resp.status == 400
    said = resp.json()["error"]["message"]
    assert said.startswith(f"Failed to fetch image from {url}: ") and message in said
    (row,) = map(orjson.loads, open(log))
    assert row["status"] == 400 and row["image_fetch_error"] == said and row["image_fetches"] == 0
