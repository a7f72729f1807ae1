"""loadkit's own engine adapters, pointed at the simulator, read every stream correctly.

This ties the simulator's wire shapes to the adapters' parsers (written separately, from the
engines' sources): each adapter's request is sent as-is and its parser must count exactly the
tokens the simulator's truth log says it sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from loadkit import types
from loadkit.engines import base, builtin
from loadkit.sim.testing import SimHandle, sim_thread
from tests.sim.rawclient import RawResponse, request

FAMILY = {"openai": "openai", "vllm": "openai", "sglang": "sglang", "tgi": "tgi", "tensorrt-llm": "triton",
          "llamacpp": "llamacpp", "ollama": "ollama"}  # fmt: skip
CASES = [(cls, api) for cls in builtin.builtin_adapters() if cls.name in FAMILY for api in cls.apis]


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SimHandle]]:
    from contextlib import ExitStack

    with ExitStack() as stack:
        yield {fam: stack.enter_context(sim_thread(fam, decode_base_ms=1.0)) for fam in set(FAMILY.values())}


def parse_all(resp: RawResponse, parser: Any, framing: str) -> list[Any]:
    events = []
    if framing == "ndjson":
        messages = [(line, None) for line in resp.body.decode().splitlines() if line.strip()]
    else:
        messages = [(d, None) for d in resp.sse_data()]
    for data, name in messages:
        ev = parser.parse(data, name)
        if ev is not None:
            events.append(ev)
    return events


@pytest.mark.parametrize("cls, api", CASES, ids=[f"{c.name}-{a}" for c, a in CASES])
def test_adapter_reads_the_simulated_stream(sims: dict[str, SimHandle], cls: Any, api: str) -> None:
    adapter = cls(base.AdapterOptions(model="ensemble", api=api))
    req = adapter.build_request(types.GenerationRequest(prompt="hello there, simulator", max_tokens=5))
    sim = sims[FAMILY[cls.name]]
    resp = request(sim.port, req.method, req.path, raw_body=req.body or b"", headers=req.headers)
    assert resp.status == 200, resp.body[:300]
    events = parse_all(resp, adapter.new_parser(), adapter.framing)
    assert not [e.error for e in events if e.error]
    assert sum(e.tokens for e in events) == 5
