"""A real model holds back a token that is a partial UTF-8 character: the next event lists one
id while tokens_predicted grows by two. Counting by the growth keeps per-event tokens exact."""

from loadkit.engines.llamacpp import LlamaCppNativeParser

EVENTS = [
    '{"index":0,"content":"a","tokens":[5],"stop":false,"tokens_predicted":1,"tokens_evaluated":4}',
    '{"index":0,"content":"","tokens":[],"stop":false,"tokens_predicted":1,"tokens_evaluated":4}',
    '{"index":0,"content":"\\u00e9","tokens":[7],"stop":false,"tokens_predicted":3,"tokens_evaluated":4}',
    '{"index":0,"content":"","tokens":[],"stop":true,"tokens_predicted":4,"tokens_evaluated":4,'
    '"stop_type":"limit","timings":{"cache_n":0,"prompt_ms":1.0}}',
]


def test_tokens_per_event_follow_tokens_predicted():
    parser = LlamaCppNativeParser()
    events = [parser.parse(e) for e in EVENTS]
    assert [e.tokens for e in events] == [1, 0, 2, 1]
    assert sum(e.tokens for e in events) == events[-1].usage.completion_tokens == 4
    assert events[-1].done and events[-1].finish_reason == "length"


def test_without_counts_falls_back_to_token_lists():
    parser = LlamaCppNativeParser()
    ev = parser.parse('{"content":"ab","tokens":[1,2],"stop":false}')
    assert ev.tokens == 2
