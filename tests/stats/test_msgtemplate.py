"""Error templates: what differs from one request to the next is masked, words are kept."""

from __future__ import annotations

import pytest

from loadkit.stats.msgtemplate import template_of


@pytest.mark.parametrize(
    ("message", "template"),
    [
        ("This model's maximum context length is 8192 tokens. However, you requested 10914 tokens",
         "This model's maximum context length is <n> tokens. However, you requested <n> tokens"),
        ("request 5f0c1e2a-1b2c-4d3e-8f9a-0123456789ab failed", "request <id> failed"),
        ("no such completion chatcmpl-9f8e7d6c5b4a", "no such completion chatcmpl-<id>"),
        ("trace 01HXYZ8K3ABCDEFGHJ2Q lost", "trace <id> lost"),
        ("bad pointer 0x7f3a", "bad pointer <id>"),
        ("model 'llama-3-8b' not found", "model '<id>' not found"),
        ('session "s_17" expired', 'session "<id>" expired'),
        ("took 1.25 s for 1,024 tokens", "took <n> s for <n> tokens"),
        ("cannot connect to 127.0.0.1:9: [Errno 111] Connection refused",
         "cannot connect to <n>:<n>: [Errno <n>] Connection refused"),
        # Words stay, quoted or not, hex-looking or not.
        ("Unexpected fields in the request: {'min_tokens', 'ignore_eos'}",
         "Unexpected fields in the request: {'min_tokens', 'ignore_eos'}"),
        ("deadbeef accepted, facade ok", "deadbeef accepted, facade ok"),
    ],
)  # fmt: skip
def test_numbers_and_ids_are_masked_words_kept(message, template):
    assert template_of(message) == template


def test_messages_differing_only_in_numbers_share_a_template():
    assert len({template_of(f"slot {i} of {i * 3} busy for {i / 7:.2f} s") for i in range(1, 200)}) == 1
