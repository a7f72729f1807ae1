import orjson
import pytest

from loadkit import types as t
from loadkit.engines.base import AdapterOptions
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from tests.helpers.wire import body_bytes, replay


def triton(model: str | None = None) -> TensorRTLLMAdapter:
    return TensorRTLLMAdapter(AdapterOptions(api="triton", model=model))


def test_triton_request_shape():
    req = triton("llama").build_request(t.GenerationRequest(prompt="What is ML?", max_tokens=3))
    assert req.path == "/v2/models/llama/generate_stream"
    assert orjson.loads(req.body) == {
        "text_input": "What is ML?",
        "max_tokens": 3,
        "stream": True,
        "min_length": 3,
    }
    assert (
        triton().build_request(t.GenerationRequest(prompt="x")).path == "/v2/models/ensemble/generate_stream"
    )


@pytest.mark.parametrize(
    "name", ["tensorrt-llm/triton_generate_stream.sse", "tensorrt-llm/triton_cumulative.sse"]
)
def test_delta_and_cumulative_text_output(name):
    r = replay(triton(), body_bytes(name))
    assert r.outcome == t.OK  # the stream closing is Triton's normal end
    assert r.tokens == [1, 1, 1] and r.text == " Machine learning is"


def test_end_on_close_only_for_triton():
    assert triton().end_on_close is True
    assert TensorRTLLMAdapter().end_on_close is False


def test_error_event():
    r = replay(triton(), body_bytes("tensorrt-llm/triton_error.sse"))
    assert r.outcome == t.IN_BAND_ERROR and "out of memory" in (r.error or "")


def test_trtllm_serve_openai_exact_output():
    body = orjson.loads(
        TensorRTLLMAdapter(AdapterOptions(api="completions"))
        .build_request(t.GenerationRequest(prompt="p", max_tokens=7))
        .body
    )
    assert body["ignore_eos"] is True and body["min_tokens"] == 7
