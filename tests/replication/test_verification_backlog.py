"""The backlog a verification run leaves (`replication.verification_backlog`): pure, on real turns."""

from __future__ import annotations

import datetime

from replication.verification import (
    Mismatch,
    PartitionEnds,
    PartitionProgress,
    PartitionTurn,
    RangeVerdict,
    VerificationLimits,
    plan_ranges,
)
from replication.verification_backlog import (
    BACKLOG_REFRESH_S,
    BEHIND_S,
    NOTHING_WAITS,
    Backlog,
    run_backlog,
    write_due,
)

T0 = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
LIMITS = VerificationLimits(range_records=100, hot_records=10_000, cold_samples_per_run=0)


def turn(partition: int, *, verified_up_to: int, end: int) -> PartitionTurn:
    progress = PartitionProgress(verified_from=0, verified_up_to=verified_up_to)
    plan = plan_ranges(progress=progress, low=0, end=end, limits=LIMITS)
    return PartitionTurn(
        "t", partition, "A.t", progress, plan, (end - 1, end - 1), PartitionEnds(0, end, end)
    )


def verified(t: PartitionTurn, *, clean: bool = True) -> None:
    offsets, _ = t.next_range()
    mismatch = None if clean else Mismatch("content differs", offsets.start, offsets.start, None, None)
    count = offsets.end - offsets.start
    t.record(RangeVerdict(offsets, count, count, 0, "d", "d", 100, mismatch, offsets.end))


def test_a_turn_counts_the_records_its_run_did_not_verify():
    t = turn(0, verified_up_to=50, end=300)  # ranges 50-150, 150-250, 250-300
    assert t.records_left == 250
    verified(t)
    assert t.records_left == 150 and t.checked
    verified(t, clean=False)  # a mismatch: re-checked alone next run, nothing else is planned
    assert t.records_left == 0


def test_a_range_put_off_is_not_the_verifiers_backlog():
    t = turn(0, verified_up_to=0, end=100)
    t.put_off()  # past the target's readable end: replication is behind, not the verifier
    assert t.records_left == 0


def test_the_backlog_is_the_partitions_left_and_the_least_recent_look_at_one():
    at = T0 + datetime.timedelta(minutes=20)
    looks = {0: T0, 1: T0 + datetime.timedelta(minutes=5), 2: None, 3: T0}
    turns = [turn(p, verified_up_to=0, end=40) for p in range(4)]
    verified(turns[3])  # verified this run: nothing left
    partial = turn(4, verified_up_to=0, end=250)
    verified(partial)  # looked at this run, 150 records left
    backlog = run_backlog([*turns, partial], last_checked=lambda t: looks.get(t.partition), at=at)
    assert backlog == Backlog(partitions=4, records=3 * 40 + 150, oldest_look_at=T0)
    assert backlog.wait_s(now=at) == 1200 and backlog.behind(now=at)
    assert not backlog.behind(now=T0 + datetime.timedelta(seconds=BEHIND_S))


def test_nothing_waits_when_every_turn_was_verified_or_there_was_none():
    done = turn(0, verified_up_to=0, end=40)
    verified(done)
    assert run_backlog([done], last_checked=lambda t: T0, at=T0) == NOTHING_WAITS
    assert run_backlog([], last_checked=lambda t: T0, at=T0) == NOTHING_WAITS
    assert NOTHING_WAITS.wait_s(now=T0) is None and not NOTHING_WAITS.behind(now=T0)


def test_a_partition_never_looked_at_waits_from_this_run():
    never = turn(0, verified_up_to=0, end=40)
    assert run_backlog([never], last_checked=lambda t: None, at=T0).oldest_look_at == T0


def test_the_backlog_is_written_when_it_changes_or_is_due_again():
    found = Backlog(2, 80, T0)
    assert write_due(None, None, found, now=T0)
    assert write_due(Backlog(2, 81, T0), T0, found, now=T0 + datetime.timedelta(seconds=1))
    assert not write_due(found, T0, found, now=T0 + datetime.timedelta(seconds=BACKLOG_REFRESH_S - 1))
    assert write_due(found, T0, found, now=T0 + datetime.timedelta(seconds=BACKLOG_REFRESH_S))
    assert not write_due(NOTHING_WAITS, T0, NOTHING_WAITS, now=T0 + datetime.timedelta(seconds=10))
