"""Cache warm-up for a windowed Mooncake replay: which prefixes, in which order, validated keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loadkit.workload import ScenarioError, load_scenario
from loadkit.workload.traces import Trace
from loadkit.workload.warmcache import expected_shares, warm_prefixes

HEAD = """
[arrival]
model = "trace"
[prompt]
shape = "prompt"
[trace]
format = "mooncake"
path = "m.jsonl"
block_tokens = 4
"""


def write_trace(tmp_path, rows):
    lines = [
        f'{{"timestamp": {t}, "input_length": {n}, "output_length": 2, "hash_ids": {ids}}}'
        for t, n, ids in rows
    ]
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")


def test_only_maximal_history_prefixes_are_sent():
    window = Trace(
        Path("x"),
        np.asarray([12, 12, 8, 8]),
        np.asarray([1, 1, 1, 1]),
        np.zeros(4),
        [[0, 1, 2], [0, 1, 9], [0, 5], [7, 8]],
    )
    history = {0, 1, 2, 5}
    assert warm_prefixes(window, history, None) == [[0, 1, 2], [0, 5]]  # [0, 1] is inside [0, 1, 2]
    assert warm_prefixes(window, history, 1) == [[0]]
    shares = expected_shares(window, history, 4, None)
    # With history: 3 + 2 + 2 + 0 leading blocks of 4 tokens; cold: row 2 finds [0, 1], row 3 finds [0].
    assert shares["cached_share_with_history"] == pytest.approx((12 + 8 + 8) / 40)
    assert shares["cached_share_cold"] == pytest.approx((8 + 4) / 40)


def test_warm_up_items_come_first_in_the_warmup_stage_and_the_window_is_shifted(write_scenario, tmp_path):
    write_trace(
        tmp_path,
        [
            (0, 12, [0, 1, 2]),
            (1000, 8, [3, 4]),
            (10000, 12, [0, 1, 9]),
            (11000, 8, [3, 4]),
            (12000, 8, [6, 7]),
        ],
    )
    sc = load_scenario(write_scenario(HEAD + "start_s = 10\nwarm_cache = true\nwarm_cache_s = 2\n"))
    src = sc.request_source()
    assert src.trace_arrival_times_s() == [0.0, 0.0, 2.0, 3.0, 4.0]
    assert src.trace_arrival_stages() == ["warmup", "warmup", "trace", "trace", "trace"]
    items = list(iter(src.next_item, None))
    assert [(r.label, r.stage, r.max_tokens, r.n_in_target) for r in items[:2]] == [
        ("cache-warmup", "warmup", 1, 8),
        ("cache-warmup", "warmup", 1, 8),
    ]
    # The window's expected cache hits count the history: [0, 1] and [3, 4] were seen before it.
    assert [r.expected_cached_tokens for r in items[2:]] == [8, 8, 0]
    assert items[2].prompt.startswith(items[0].prompt + " ")
    warm = src.realised()["cache_warmup"]
    assert warm["prefixes"] == 2 and warm["requests"] == 2 and warm["prompt_tokens"] == 16
    # Two workers share the warm-up prefixes out, like everything else.
    shares = [sc.request_source(w, 2).trace_arrival_stages().count("warmup") for w in range(2)]
    assert shares == [1, 1]


@pytest.mark.parametrize(
    "extra, message",
    [
        ("warm_cache = true\n", "expected start_s > 0"),
        ("start_s = 1\nwarm_cache = true\nloop = true\n", "expected no loop with warm_cache"),
        (
            "start_s = 1\nwarm_cache = true\nas_sessions = true\n",
            "expected warm_cache only with format 'mooncake'",
        ),
    ],
)
def test_warm_cache_keys_are_validated(write_scenario, tmp_path, extra, message):
    write_trace(tmp_path, [(0, 4, [0]), (2000, 4, [0, 1])])
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write_scenario(HEAD + extra))


def test_warm_cache_needs_trace_arrivals(write_scenario, tmp_path):
    write_trace(tmp_path, [(0, 4, [0]), (2000, 4, [0, 1])])
    body = HEAD.replace('model = "trace"', 'model = "closed"\nusers = 2') + "start_s = 1\nwarm_cache = true\n"
    with pytest.raises(ScenarioError, match=r"trace\.warm_cache: expected arrival model 'trace'"):
        load_scenario(write_scenario(body))
