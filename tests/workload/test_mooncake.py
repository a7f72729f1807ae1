"""Mooncake replay: hash ids become shared text blocks, so the trace's prefix sharing is real.

A block-granular prefix cache (what vLLM/SGLang/the simulator keep) is modelled here on the
prompt *text*: a request's cached tokens are the longest run of leading 512-word blocks whose
whole prefix was sent before. That must equal the ``expected_cached_tokens`` the workload
promises, and the realised block-repeat ratio must equal the trace's own.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from loadkit.workload import TraceSession, load_scenario
from loadkit.workload.mooncake import group_sessions
from tests.workload.conftest import TRACES

TRACE = TRACES / "mooncake-fast25" / "conversation_trace.jsonl"


def scenario(write_scenario, extra: str = "", top: str = ""):
    return load_scenario(
        write_scenario(
            f'{top}[arrival]\nmodel = "trace"\n[trace]\nformat = "mooncake"\npath = "{TRACE}"\n{extra}'
        )
    )


class PrefixCache:
    """Hashes of every block-aligned word prefix seen so far."""

    def __init__(self, block: int = 512) -> None:
        self.block = block
        self.seen: set[bytes] = set()

    def hits_then_insert(self, text: str) -> int:
        words = text.split()
        h = hashlib.sha256()
        hit, still_hitting = 0, True
        for start in range(0, len(words), self.block):
            chunk = words[start : start + self.block]
            if len(chunk) < self.block:
                break  # a partial block is never a cache entry
            h.update(" ".join(chunk).encode() + b"|")
            digest = h.copy().digest()
            if still_hitting and digest in self.seen:
                hit += len(chunk)
            else:
                still_hitting = False
            self.seen.add(digest)
        return hit


def test_prefix_hits_match_expected_cached_tokens_and_trace_ratio(write_scenario):
    src = scenario(write_scenario, top="max_requests = 400\n").request_source()
    cache = PrefixCache()
    mismatches = 0
    for req in iter(src.next_item, None):
        text = req.messages[0]["content"]
        assert len(text.split()) == req.n_in_target
        expected = req.expected_cached_tokens
        # The cache counts full blocks only; the expectation may include a repeated partial last block.
        full_blocks_expected = expected - (expected % 512 if expected == req.n_in_target else 0)
        mismatches += cache.hits_then_insert(text) != full_blocks_expected
    assert mismatches == 0
    sharing = src.realised()["prefix_sharing"]
    assert sharing["realised_ratio"] == pytest.approx(sharing["trace_ratio_items"], abs=0.002)
    import orjson

    ids = [orjson.loads(line)["hash_ids"] for line in TRACE.read_bytes().splitlines()[:400]]
    seen: set[int] = set()
    repeats = 0
    for row in ids:
        repeats += sum(h in seen for h in row)
        seen.update(row)
    assert sharing["trace_ratio_items"] == pytest.approx(repeats / sum(map(len, ids)))
    assert sharing["realised_ratio"] > 0.1  # the shared system block and conversation prefixes


def test_block_zero_is_the_shared_system_prompt(write_scenario):
    src = scenario(write_scenario, top="max_requests = 5\n").request_source()
    heads = {" ".join(r.messages[0]["content"].split()[:512]) for r in iter(src.next_item, None)}
    assert len(heads) == 1


def test_replay_times_and_clipping(write_scenario):
    sc = scenario(
        write_scenario, "end_s = 30\nspeed = 3.0\nmax_input_tokens = 2000\nmax_output_tokens = 64\n"
    )
    src = sc.request_source()
    times = src.trace_arrival_times_s()
    assert times and max(times) < 10.0 and times == sorted(times)
    reqs = list(iter(src.next_item, None))
    assert len(reqs) == len(times)
    assert max(r.n_in_target for r in reqs) <= 2000 and max(r.max_tokens for r in reqs) <= 64


def test_sessions_follow_prefix_groups(write_scenario):
    sc = scenario(write_scenario, "as_sessions = true\nend_s = 300\nspeed = 2.0\n")
    src = sc.request_source()
    import orjson

    rows = [orjson.loads(line) for line in TRACE.read_bytes().splitlines()]
    rows = [r for r in rows if r["timestamp"] < 300_000]
    groups = group_sessions([r["hash_ids"] for r in rows])
    assert src.trace_arrival_times_s() == [rows[g[0]]["timestamp"] / 2000.0 for g in groups]
    multi = next(i for i, g in enumerate(groups) if len(g) >= 3)
    sessions = [src.next_item() for _ in range(multi + 1)]
    session = sessions[multi]
    assert isinstance(session, TraceSession) and session.turns_planned == len(groups[multi])
    first = session.next_request(None, True)
    gap = session.think_time_s()
    second = session.next_request("whatever the server said", True)
    g = groups[multi]
    assert (first.n_in_target, second.n_in_target) == (rows[g[0]]["input_length"], rows[g[1]]["input_length"])
    assert gap == pytest.approx((rows[g[1]]["timestamp"] - rows[g[0]]["timestamp"]) / 2000.0)
    assert first.label == "turn1" and second.label == "turnN" and second.turn == 2
    assert second.expected_cached_tokens > 512  # the conversation's own earlier blocks
    assert session.next_request(None, False, "http_error:500") is None
    assert session.status == "broken" and session.broken_reason == "http_error:500"


@pytest.mark.slow
def test_full_trace_realises_the_readme_ratio(write_scenario):
    """All 12,031 requests (~16 s): realised block-repeat ratio equals the trace's 36.6%."""
    src = scenario(write_scenario).request_source()
    n = sum(1 for _ in iter(src.next_item, None))
    sharing = src.realised()["prefix_sharing"]
    assert n == 12031
    assert sharing["trace_ratio"] == pytest.approx(0.366, abs=0.001)
    assert sharing["realised_ratio"] == pytest.approx(sharing["trace_ratio"], abs=0.001)
    assert np.isclose(src.realised()["input_tokens"]["mean"], 12035, atol=1)
