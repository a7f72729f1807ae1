"""loadkit's adapter contract suite, run on this adapter's recorded streams."""

from pathlib import Path

from loadkit_anthropic import AnthropicAdapter

from loadkit import Usage
from loadkit.testing.adapters import AdapterContract, StreamCase


class TestAnthropicContract(AdapterContract):
    adapter = AnthropicAdapter
    fixtures = Path(__file__).parent / "fixtures"
    keepalives = (b'event: ping\ndata: {"type": "ping"}\n\n',)
    cases = [
        StreamCase(
            "messages_stream.sse",
            tokens=[1, 1],
            text="Hello!",
            n_out=15,
            usage=Usage(prompt_tokens=125, completion_tokens=15, cached_tokens=100),
        ),
        StreamCase("thinking_stream.sse", tokens=[1, 1], text="The GCD is 21."),
        StreamCase("error_stream.sse", outcome="in_band_error", error="overloaded_error: Overloaded"),
    ]
