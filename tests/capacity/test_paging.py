"""Paged allocation and fragmentation: the issue's figures, hand cases, and properties."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadkit.capacity import blocks_per_sequence, fragmentation
from loadkit.capacity.paging import choose_block_sizes, fit_row, paging_row

ISSUE_LENGTHS = [12, 105, 43, 512, 88, 3, 230]


def test_issue_fragmentation_figures() -> None:
    # used 993 tokens; 8-token blocks allocate 127 blocks = 1016 -> 23/1016
    frag8 = fragmentation(ISSUE_LENGTHS, 8)
    assert frag8 == float(Fraction(23, 1016))
    assert round(100 * frag8, 2) == 2.26
    # 64-token blocks: 1+2+1+8+2+1+4 = 19 blocks = 1216 -> 223/1216
    frag64 = fragmentation(ISSUE_LENGTHS, 64)
    assert frag64 == float(Fraction(223, 1216))
    assert round(100 * frag64, 2) == 18.34


def test_blocks_are_integer_ceilings() -> None:
    lengths = np.array([0, 1, 15, 16, 17, 32, 33])
    assert blocks_per_sequence(lengths, 16).tolist() == [0, 1, 1, 1, 2, 2, 3]


def test_paging_row_counts() -> None:
    row = paging_row(np.array(ISSUE_LENGTHS), 64)
    assert row["blocks"] == 19 and row["allocated_tokens"] == 1216 and row["used_tokens"] == 993
    assert row["mean_waste_tokens_per_seq"] == pytest.approx(223 / 7)


def test_no_lengths_means_not_measured() -> None:
    assert fragmentation([], 16) is None
    assert fragmentation([0, 0], 16) is None


def test_recommendation_prefers_largest_block_under_limit() -> None:
    rows = [paging_row(np.array(ISSUE_LENGTHS), b) for b in (8, 16, 32, 64)]
    rec = choose_block_sizes(rows, 0.05)
    assert rec["least_waste"] == 8
    assert rec["largest_under_limit"] == 16  # 4.52% passes, 11.34% does not
    assert choose_block_sizes(rows, 0.01)["largest_under_limit"] is None


def test_fit_row_hand_computed() -> None:
    # 1 MiB budget, 1 KiB per token, 16-token blocks of 16 KiB: 64 blocks, 1024 tokens.
    row = fit_row(1024.0, 16, 2**20, np.array([16, 48, 16, 48]), shared_fraction=0.5)
    assert row["num_blocks"] == 64 and row["max_tokens"] == 1024
    assert row["max_seqs"] == 32  # mean 2 blocks per sequence
    assert row["max_seqs_longest"] == 21  # every sequence 3 blocks long
    assert row["used_tokens_at_max_seqs"] == 32 * 32
    assert row["max_seqs_with_sharing"] == 64  # half of each sequence already resident


def test_fit_row_without_budget_or_lengths() -> None:
    row = fit_row(1024.0, 16, -5.0, None)
    assert row["num_blocks"] == 0 and row["max_tokens"] == 0
    assert row["max_seqs"] is None and row["max_seqs_p99"] is None


lengths_st = st.lists(st.integers(min_value=1, max_value=100_000), min_size=1, max_size=200)


@given(lengths_st, st.sampled_from([1, 8, 16, 32, 64, 128, 256]))
def test_fragmentation_bounds(lengths: list[int], block: int) -> None:
    frag = fragmentation(lengths, block)
    assert frag is not None and 0 <= frag < 1
    # each sequence wastes fewer than `block` tokens
    waste = frag * int(blocks_per_sequence(np.array(lengths), block).sum()) * block
    assert waste < block * len(lengths) + 1e-6


@given(lengths_st)
def test_nested_block_sizes_never_waste_less_when_larger(lengths: list[int]) -> None:
    fracs = [fragmentation(lengths, b) for b in (8, 16, 32, 64, 128)]
    assert all(a is not None and b is not None and a <= b + 1e-12 for a, b in pairwise(fracs))


@given(st.lists(st.integers(min_value=1, max_value=500), min_size=1, max_size=50))
def test_exact_multiples_waste_nothing(multiples: list[int]) -> None:
    assert fragmentation([16 * k for k in multiples], 16) == 0.0
