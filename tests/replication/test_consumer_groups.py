"""Consumer group decisions: lag and the offset reset plan, with known answers."""

from __future__ import annotations

from replication.consumer_groups import ResetStrategy, is_active, lag, offsets_to_write, plan_reset

P0, P1 = ("orders", 0), ("orders", 1)
EARLIEST, END = {P0: 10, P1: 0}, {P0: 100, P1: 50}


def _plan(strategy, **extra):
    return plan_reset(
        strategy=strategy, partitions=[P0, P1], current={P0: 40, P1: 50}, earliest=EARLIEST, end=END, **extra
    )


def test_lag_is_clamped_at_zero_and_unknown_when_a_figure_is():
    assert (lag(40, 100), lag(120, 100), lag(None, 100), lag(3, None)) == (60, 0, None, None)


def test_only_groups_nobody_consumes_in_are_inactive():
    assert not is_active("EMPTY") and not is_active("DEAD") and not is_active("ABSENT")
    assert is_active("STABLE") and is_active("PREPARING_REBALANCE") and is_active("UNKNOWN")


def test_earliest_and_latest():
    assert [(r.new, r.changes) for r in _plan(ResetStrategy.EARLIEST)] == [(10, True), (0, True)]
    latest = _plan(ResetStrategy.LATEST)
    assert [(r.new, r.changes) for r in latest] == [(100, True), (50, False)]
    assert offsets_to_write(latest) == {P0: 100}  # an unchanged partition is not written


def test_timestamp_falls_back_to_the_end_when_no_record_is_that_new():
    rows = _plan(ResetStrategy.TIMESTAMP, by_time={P0: 70, P1: -1})
    assert [(r.new, r.note) for r in rows] == [(70, ""), (50, "no record at or after that time: the end")]


def test_translated_offsets_below_the_log_start_move_to_it_and_unknown_ones_are_not_written():
    rows = _plan(ResetStrategy.TRANSLATED, translated={P0: 4, P1: None})
    assert rows[0].new == 10 and "before the log start 10" in rows[0].note
    assert rows[1].new is None and "no exact translation" in rows[1].note
    assert offsets_to_write(rows) == {P0: 10}


def test_a_shift_moves_the_committed_offset_within_the_log_start_and_the_end():
    back = _plan(ResetStrategy.SHIFT, shift_by=-35)
    assert [(r.new, r.note) for r in back] == [
        (10, "5 is before the log start 10 (deleted by retention): the log start"),
        (15, ""),
    ]
    forward = _plan(ResetStrategy.SHIFT, shift_by=55)
    assert [(r.new, r.note) for r in forward] == [(95, ""), (50, "105 is past the end 50: the end")]
    assert [(r.lag_before, r.lag_after, r.lag_change) for r in forward] == [(60, 5, -55), (0, 0, 0)]


def test_a_shift_needs_a_committed_offset_to_move_from():
    (row,) = plan_reset(
        strategy=ResetStrategy.SHIFT, partitions=[P0], current={}, earliest=EARLIEST, end=END, shift_by=5
    )
    assert row.new is None and "nothing committed" in row.note and offsets_to_write([row]) == {}
    assert (row.lag_before, row.lag_after, row.lag_change) == (None, None, None)


def test_a_given_offset_is_kept_within_the_log_start_and_the_end():
    rows = _plan(ResetStrategy.OFFSET, to_offset=30)
    assert [(r.new, r.lag_change) for r in rows] == [(30, 10), (30, 20)]
    assert [r.new for r in _plan(ResetStrategy.OFFSET, to_offset=5)] == [10, 5]
    assert [r.new for r in _plan(ResetStrategy.OFFSET, to_offset=10**18)] == [100, 50]
