"""`bench producers`' pure parts: the rotated order of each round and its producer counts."""

from __future__ import annotations

import argparse

import pytest

from bench.producers import producer_counts, rotated


def test_each_round_leads_with_another_producer_count():
    assert [rotated([1, 2, 4], n) for n in range(4)] == [[1, 2, 4], [2, 4, 1], [4, 1, 2], [1, 2, 4]]


def test_producer_counts_always_hold_the_one_producer_baseline_and_refuse_zero():
    assert producer_counts("4") == [1, 4]
    assert producer_counts("4, 2,1,") == [1, 2, 4]
    with pytest.raises(argparse.ArgumentTypeError, match="0 must be at least 1"):
        producer_counts("0")
