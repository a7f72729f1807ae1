"""A run's prompt salt (issue 32): other words in every prompt, the same lengths, choices and
within-run prefix sharing; the same salt, the same prompts; salt 0, the scenario's own."""

from __future__ import annotations

from typing import Any

import pytest

from loadkit.workload import Session, load_scenario
from loadkit.workload.text import salted_seed
from tests.workload.test_mooncake import PrefixCache
from tests.workload.test_mooncake import scenario as mooncake_scenario


def _requests(sc: Any, salt: int, n: int = 60) -> list[Any]:
    src = sc.request_source(salt=salt)
    return [src.next_item() for _ in range(n)]


def _text(req: Any) -> str:
    return req.messages[0]["content"] if req.messages else req.prompt


def test_salted_prompts_change_from_the_first_word_and_keep_every_length():
    sc = load_scenario("uneven_chat")
    plain, a, again, b = (_requests(sc, s) for s in (0, 11, 11, 12))
    for x, y in ((plain, a), (a, b)):
        assert [(r.n_in_target, r.max_tokens, r.label) for r in x] == [
            (r.n_in_target, r.max_tokens, r.label) for r in y
        ]
        firsts_equal = sum(_text(p).split()[0] == _text(q).split()[0] for p, q in zip(x, y, strict=True))
        assert firsts_equal <= 2  # 4,900 words: a chance collision or two, never the same prompts
        assert all(len(_text(p).split()) == len(_text(q).split()) for p, q in zip(x, y, strict=True))
    assert [_text(r) for r in a] == [_text(r) for r in again]  # --seed N repeats the run exactly
    assert [_text(r) for r in plain] == [_text(r) for r in _requests(load_scenario("uneven_chat"), 0)]
    assert salted_seed(sc.seed, 0) == sc.seed  # salt 0: the scenario's own prompts, as before salting


def test_shared_system_prompts_are_still_shared_within_a_salted_run():
    sc = load_scenario("agent-multiturn")

    def systems(salt: int) -> tuple[dict[int, str], list[int]]:
        src = sc.request_source(salt=salt)
        texts: dict[int, str] = {}
        lengths = []
        for _ in range(40):
            session = src.next_item()
            assert isinstance(session, Session)
            first = session.next_request(None, True)
            assert first is not None and first.messages[0]["role"] == "system"
            text = first.messages[0]["content"]
            texts.setdefault(hash(text), text)
            lengths.append(first.n_in_target)
        return texts, lengths

    plain, plain_lengths = systems(0)
    salted, salted_lengths = systems(99)
    assert len(salted) == len(plain) < 40  # as many distinct system prompts: the Zipf pool reused
    assert salted_lengths == plain_lengths
    assert not set(plain.values()) & set(salted.values())  # but none of the unsalted run's texts


def test_mooncake_blocks_share_text_within_a_salted_run_as_the_hash_ids_say(write_scenario):
    salt = 7
    src = mooncake_scenario(write_scenario, top="max_requests = 150\n").request_source(salt=salt)
    cache = PrefixCache()
    mismatches = 0
    texts = []
    for req in iter(src.next_item, None):
        text = _text(req)
        texts.append(text)
        expected = req.expected_cached_tokens
        full_blocks_expected = expected - (expected % 512 if expected == req.n_in_target else 0)
        mismatches += cache.hits_then_insert(text) != full_blocks_expected
    assert mismatches == 0  # the trace's block sharing reaches the text, salted or not
    sharing = src.realised()["prefix_sharing"]
    assert sharing["realised_ratio"] == pytest.approx(sharing["trace_ratio_items"], abs=0.002)
    other = [_text(r) for r in iter(mooncake_scenario(write_scenario, top="max_requests = 150\n")
                                   .request_source(salt=salt + 1).next_item, None)]  # fmt: skip
    warm, cold = PrefixCache(), PrefixCache()
    for text in texts:
        warm.hits_then_insert(text)
    # A rerun with another salt gets no more hits from a cache the first run filled than from an
    # empty one (its own sharing, as much as the first run's), and would get all of them unsalted.
    own = sum(cold.hits_then_insert(t) for t in other)
    assert sum(warm.hits_then_insert(t) for t in other) == own > 0
    same = PrefixCache()
    for text in texts:
        same.hits_then_insert(text)
    assert sum(same.hits_then_insert(t) for t in texts) > own
