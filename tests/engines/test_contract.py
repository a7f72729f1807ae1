"""Every built-in adapter runs loadkit.testing.adapters, the contract suite plugins use too."""

from loadkit import types as t
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.testing.adapters import GARBAGE, AdapterContract, StreamCase
from tests.helpers.wire import FIXTURES

# The OpenAI-family adapters also refuse a choices field that is not a list.
OPENAI_GARBAGE = (*GARBAGE, '{"choices": "x"}')


class TestVLLMContract(AdapterContract):
    adapter = VLLMAdapter
    fixtures = FIXTURES / "vllm"
    garbage = OPENAI_GARBAGE
    cases = [
        StreamCase(
            "chat_continuous_usage_reasoning.sse",
            tokens=[1, 1, 2, 1],
            text="Héllo world",
            n_out=5,
            usage=t.Usage(prompt_tokens=12, completion_tokens=5, cached_tokens=8),
            api="chat",
        ),
        StreamCase("completions.sse", tokens=[1, 1, 1], n_out=3, api="completions"),
        StreamCase("error_new.sse", outcome=t.IN_BAND_ERROR, tokens=[1], api="completions"),
        StreamCase("error_old.sse", outcome=t.IN_BAND_ERROR, api="completions"),
    ]


class TestSGLangContract(AdapterContract):
    adapter = SGLangAdapter
    fixtures = FIXTURES / "sglang"
    cases = [
        StreamCase("native_generate.sse", tokens=[1, 2, 1], n_out=4, api="native"),
        StreamCase("native_abort.sse", outcome=t.IN_BAND_ERROR, tokens=[], api="native"),
        StreamCase("native_error.sse", outcome=t.IN_BAND_ERROR, api="native"),
        StreamCase("chat.sse", tokens=[1, 1], n_out=2, api="chat"),
    ]


class TestTGIContract(AdapterContract):
    adapter = TGIAdapter
    fixtures = FIXTURES / "tgi"
    cases = [
        StreamCase("generate_stream.sse", tokens=[1, 1, 1, 1], n_out=4, api="native"),
        StreamCase("error.sse", outcome=t.IN_BAND_ERROR, tokens=[1], api="native"),
    ]


class TestTensorRTLLMContract(AdapterContract):
    adapter = TensorRTLLMAdapter
    fixtures = FIXTURES / "tensorrt-llm"
    cases = [
        StreamCase("triton_generate_stream.sse", tokens=[1, 1, 1], api="triton"),
        StreamCase("triton_error.sse", outcome=t.IN_BAND_ERROR, error="out of memory", api="triton"),
    ]


class TestLlamaCppContract(AdapterContract):
    adapter = LlamaCppAdapter
    fixtures = FIXTURES / "llamacpp"
    garbage = OPENAI_GARBAGE
    cases = [
        StreamCase("native_completion.txt", tokens=[1] * 6 + [8, 1, 1], n_out=16, api="native"),
        StreamCase("completions.txt", tokens=[1] * 8, n_out=16, api="completions"),
        StreamCase("chat_completions.txt", api="chat"),
        StreamCase("error_event.sse", outcome=t.IN_BAND_ERROR, api="completions"),
    ]


class TestOllamaContract(AdapterContract):
    adapter = OllamaAdapter
    fixtures = FIXTURES / "ollama"
    cases = [
        StreamCase("generate.ndjson", tokens=[1, 1, 1], n_out=3, api="native"),
        StreamCase("chat_thinking.ndjson", tokens=[1, 1, 1], n_out=3, api="chat"),
        StreamCase("error.ndjson", outcome=t.IN_BAND_ERROR, tokens=[1], api="native"),
    ]
