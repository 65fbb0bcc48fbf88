"""Continuous verification's pure decisions: digests, range planning, the byte budget, comparison."""

from __future__ import annotations

import dataclasses

import pytest

from replication.formats import OffsetSync
from replication.mirroring import SOURCE_OFFSET_HEADER
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import PROVENANCE_HEADER
from replication.verification import (
    ByteBudget,
    MirroredRecord,
    OffsetRange,
    PartitionEnds,
    PartitionOutcome,
    PartitionProgress,
    PartitionTurn,
    RunClock,
    VerificationLimits,
    compare_range,
    fold_verdicts,
    partition_turn,
    plan_ranges,
    record_digest,
    rotation,
    verifiable_end,
)


def rec(offset: int, value: bytes = b"", *, key: bytes = b"k", headers=(), ts: int | None = 1000):
    return MirroredRecord(offset, key, value or b"v%d" % offset, tuple(headers), ts, 10)


def translator(*syncs: tuple[int, int]):
    """The exact translation the mirror's syncs give (the last one is its progress sync)."""
    store = OffsetSyncStore()
    store.update_all(OffsetSync("t", 0, u, d) for u, d in syncs)
    return lambda offset: store.translate_downstream("t", 0, offset)


# -- digest -----------------------------------------------------------------------------------------------
def test_digest_ignores_our_headers_but_not_others():
    plain = rec(0, b"x", headers=[("trace", b"1")])
    ours = rec(
        9, b"x", headers=[("trace", b"1"), (PROVENANCE_HEADER, b"A"), (SOURCE_OFFSET_HEADER, b"\0" * 8)]
    )
    assert record_digest(plain) == record_digest(ours)
    assert record_digest(plain) != record_digest(rec(0, b"x", headers=[("trace", b"2")]))
    assert record_digest(plain) != record_digest(rec(0, b"x", headers=[("trace", b"1")], key=b"other"))


def test_digest_tells_null_from_empty():
    assert record_digest(MirroredRecord(0, None, b"v")) != record_digest(MirroredRecord(0, b"", b"v"))


# -- planning ---------------------------------------------------------------------------------------------
LIMITS = VerificationLimits(range_records=100, hot_records=1000, cold_samples_per_run=2)


def test_verifiable_end_is_the_earlier_of_position_and_newest_sync():
    assert verifiable_end(replicated_position=500, newest_sync_upstream=299) == 300
    assert verifiable_end(replicated_position=200, newest_sync_upstream=299) == 200
    assert verifiable_end(replicated_position=None, newest_sync_upstream=299) is None
    assert verifiable_end(replicated_position=200, newest_sync_upstream=None) is None


def test_plan_continues_from_verified_up_to_in_ranges():
    plan = plan_ranges(progress=PartitionProgress(0, 150), low=0, end=420, limits=LIMITS)
    assert plan.verified_from == 0
    assert plan.ranges == (OffsetRange(150, 250), OffsetRange(250, 350), OffsetRange(350, 420))
    assert plan.samples == ()


def test_first_plan_starts_near_the_end_and_samples_cold_data():
    plan = plan_ranges(progress=PartitionProgress(), low=10, end=5000, limits=LIMITS, seed=7)
    assert plan.verified_from == 4000
    assert plan.ranges[0] == OffsetRange(4000, 4100) and plan.ranges[-1] == OffsetRange(4900, 5000)
    assert 1 <= len(plan.samples) <= 2
    assert all(r.start >= 10 and r.end <= 4000 for r in plan.samples)
    assert (
        plan.samples
        == plan_ranges(progress=PartitionProgress(), low=10, end=5000, limits=LIMITS, seed=7).samples
    )


def test_plan_restarts_when_retention_passed_the_verified_part():
    plan = plan_ranges(progress=PartitionProgress(0, 50), low=300, end=420, limits=LIMITS)
    assert plan.verified_from == 300 and plan.ranges[0] == OffsetRange(300, 400)


def test_plan_rechecks_a_mismatch_alone():
    progress = PartitionProgress(0, 100, recheck=OffsetRange(100, 200))
    plan = plan_ranges(progress=progress, low=0, end=5000, limits=LIMITS)
    assert plan.ranges == (OffsetRange(100, 200),) and plan.samples == ()


def test_nothing_to_plan_when_caught_up():
    plan = plan_ranges(progress=PartitionProgress(0, 420), low=0, end=420, limits=LIMITS)
    assert plan.ranges == () and plan.samples == ()


def test_no_cold_sample_without_new_records():
    """A partition with nothing new gets no turn: not even a cold sample is read."""
    caught_up = plan_ranges(progress=PartitionProgress(4000, 5000), low=0, end=5000, limits=LIMITS, seed=3)
    assert caught_up.ranges == () and caught_up.samples == ()
    moving = plan_ranges(progress=PartitionProgress(4000, 4900), low=0, end=5000, limits=LIMITS, seed=3)
    assert moving.ranges == (OffsetRange(4900, 5000),) and len(moving.samples) >= 1


def test_byte_budget_admits_a_round_on_estimates():
    budget = ByteBudget(allowance=10_000)
    ranges = [OffsetRange(0, 4)] * 5  # 4 offsets each, assumed 1,000 bytes per offset before any read
    assert budget.admit(ranges) == 3  # 0, 4,000, 8,000 planned: each started with some allowance left
    budget.spend(800, offsets=8)  # read: 100 bytes per offset
    assert budget.estimate(4) == 400 and budget.admit(ranges) == 5
    budget.spend(9_200, offsets=4)
    assert budget.exhausted and budget.admit(ranges) == 0


def test_run_clock_starts_the_first_batch_whatever_its_budget():
    clock = RunClock(deadline=100.0)
    assert clock.may_start(500.0)
    clock.start()
    assert clock.may_start(99.0) and not clock.may_start(100.0)


def test_rotation_takes_never_checked_then_least_recently_checked_first():
    at = {"a": None, "b": 3, "c": None, "d": 1, "e": 2}
    assert rotation(list(at), last_checked=lambda k: at[k] and _when(at[k])) == ["a", "c", "d", "e", "b"]


def _when(second: int):
    import datetime

    return datetime.datetime(2026, 1, 1, second=second, tzinfo=datetime.UTC)


ENDS = PartitionEnds(log_start=0, source_end=400, target_end=400)


def turn_for(progress: PartitionProgress, *, end: int = 400, ends: PartitionEnds = ENDS):
    return partition_turn(
        topic="t",
        partition=0,
        remote_topic="A.t",
        progress=progress,
        replicated_position=end,
        newest_sync=(end - 1, end - 1),
        oldest_sync_upstream=0,
        ends=ends,
        limits=LIMITS,
        seed=1,
    )


def test_a_partition_with_nothing_new_has_no_turn_only_its_outcome():
    assert isinstance(turn_for(PartitionProgress(0, 400)), PartitionOutcome)
    assert (
        turn_for(PartitionProgress(0, 400)).status == "ok" and not turn_for(PartitionProgress(0, 400)).checked
    )
    unsynced = partition_turn(
        topic="t", partition=0, remote_topic="A.t", progress=PartitionProgress(), replicated_position=9,
        newest_sync=None, oldest_sync_upstream=None, ends=ENDS, limits=LIMITS, seed=1,
    )  # fmt: skip
    assert (unsynced.status, unsynced.reason) == ("unverifiable", "no offset sync read yet")


def test_a_turn_verifies_its_ranges_in_order_up_to_the_first_mismatch():
    turn = turn_for(PartitionProgress(0, 100, target_verified_up_to=100))
    assert isinstance(turn, PartitionTurn)
    assert turn.next_range() == (OffsetRange(100, 200), 100)  # continues the verified part on the target
    turn.record(dataclasses.replace(verdict(100, 200), target_end=201))  # a foreign record at 200
    assert turn.next_range() == (OffsetRange(200, 300), 201)
    turn.record(verdict(200, 300, clean=False))
    assert turn.next_range() is None  # no range after a mismatch
    outcome = turn.outcome()
    assert (outcome.status, outcome.verified_up_to, outcome.mismatch.source_offset) == ("mismatch", 200, 200)
    assert outcome.checked


def test_a_turn_puts_off_what_either_side_cannot_read_yet():
    turn = turn_for(PartitionProgress(0, 100), ends=PartitionEnds(0, 250, 400))
    assert turn.readable(OffsetRange(100, 200), 200) and not turn.readable(OffsetRange(200, 300), 300)
    assert not turn.readable(OffsetRange(100, 200), 401)  # the copy's end is past the target's end
    turn.record(verdict(100, 200))
    turn.put_off()
    assert turn.next_range() is None
    assert (turn.outcome().status, turn.outcome().verified_up_to) == ("ok", 200)


def test_a_turn_put_off_before_any_read_is_over_in_the_rotation():
    """A partition whose first range neither side can read yet was tried: its turn is over (the row is
    written and the rotation moves on), though no range gave a verdict."""
    turn = turn_for(PartitionProgress(0, 100), ends=PartitionEnds(0, 150, 400))
    assert isinstance(turn, PartitionTurn)
    turn.put_off()
    assert turn.next_range() is None
    assert turn.outcome().checked


def test_byte_budget():
    budget = ByteBudget.for_run(bytes_per_s=1000, interval_s=2)
    assert budget.allowance == 2000 and not budget.exhausted
    budget.spend(1500)
    assert not budget.exhausted
    budget.spend(600)
    assert budget.exhausted


# -- comparison -------------------------------------------------------------------------------------------
def test_identical_copy_is_clean_with_equal_digests():
    source = [rec(o) for o in range(5)]
    target = [rec(o + 100, b"v%d" % o, headers=[(PROVENANCE_HEADER, b"A")]) for o in range(5)]
    verdict = compare_range(
        offsets=OffsetRange(0, 5), source=source, target=target, translate=translator((0, 100), (4, 104))
    )
    assert verdict.clean and verdict.source_count == verdict.target_count == 5
    assert verdict.source_digest == verdict.target_digest


def test_source_gaps_and_target_markers_are_not_mismatches():
    # Source offsets 2-4 compacted away, 7 a transaction marker; the target has a marker at 103.
    source = [rec(o) for o in (0, 1, 5, 6, 8)]
    target = [rec(d, b"v%d" % u) for u, d in ((0, 100), (1, 101), (5, 102), (6, 104), (8, 105))]
    translate = translator((0, 100), (5, 102), (6, 104), (8, 105))
    verdict = compare_range(offsets=OffsetRange(0, 9), source=source, target=target, translate=translate)
    assert verdict.clean, verdict.mismatch


def test_altered_content_names_the_source_offset_with_both_records():
    source = [rec(o) for o in range(5)]
    target = [rec(o, b"v%d" % o if o != 3 else b"rogue") for o in range(5)]
    translate = translator((0, 0), (4, 4))
    verdict = compare_range(offsets=OffsetRange(0, 5), source=source, target=target, translate=translate)
    assert verdict.mismatch.reason == "content differs"
    assert (verdict.mismatch.source_offset, verdict.mismatch.target_offset) == (3, 3)
    assert verdict.mismatch.source.value == b"v3" and verdict.mismatch.target.value == b"rogue"
    assert verdict.source_digest != verdict.target_digest


def test_a_rewrite_ids_copy_is_compared_with_the_source_as_copied():
    """A `rewrite-ids` flow's copies name the target registry's schema IDs: with the sync's map the rewritten
    IDs are no difference (key and value, and for a duplicate too); an ID the map does not give is one,
    and so is any other byte. Without the map every such copy "differs" (false alarms before)."""

    def wire(schema_id: int, body: bytes) -> bytes:
        return b"\x00" + schema_id.to_bytes(4, "big") + body

    source = [rec(o, wire(5, b"order-%d" % o), key=wire(6, b"k")) for o in range(4)]
    copies = [rec(o, wire(105, b"order-%d" % o), key=wire(106, b"k")) for o in range(4)]
    copies.append(rec(4, wire(105, b"order-3"), key=wire(106, b"k")))  # an at-least-once duplicate of 3
    translate = translator((0, 0), (3, 3))
    ids = {5: 105, 6: 106}

    verdict = compare_range(
        offsets=OffsetRange(0, 4), source=source, target=copies, translate=translate, schema_ids=ids
    )
    assert verdict.clean and verdict.duplicates == 1, verdict.mismatch
    unmapped = compare_range(offsets=OffsetRange(0, 4), source=source, target=copies, translate=translate)
    assert unmapped.mismatch.reason == "content differs" and unmapped.mismatch.source_offset == 0
    wrong = [*copies[:2], rec(2, wire(7, b"order-2"), key=wire(106, b"k")), *copies[3:4]]
    verdict = compare_range(
        offsets=OffsetRange(0, 4), source=source, target=wrong, translate=translate, schema_ids=ids
    )
    assert verdict.mismatch.reason == "content differs" and verdict.mismatch.source_offset == 2
    altered = [*copies[:1], rec(1, wire(105, b"order-X"), key=wire(106, b"k")), *copies[2:4]]
    verdict = compare_range(
        offsets=OffsetRange(0, 4), source=source, target=altered, translate=translate, schema_ids=ids
    )
    assert verdict.mismatch.source_offset == 1


def test_a_rewrite_ids_mismatch_holds_the_source_record_as_it_is_on_the_source():
    """The evidence of a `rewrite-ids` flow's mismatch is the source's own bytes (its schema IDs, not the
    target's ones it was compared with), and the mismatch says it was compared as copied; a record another
    producer wrote is reported beside the source record that follows it, as it is on the source too."""

    def wire(schema_id: int, body: bytes) -> bytes:
        return b"\x00" + schema_id.to_bytes(4, "big") + body

    source = [rec(o, wire(5, b"order-%d" % o), key=wire(6, b"k")) for o in range(4)]
    copies = [rec(o, wire(105, b"order-%d" % o), key=wire(106, b"k")) for o in range(4)]
    translate = translator((0, 0), (3, 3))
    ids = {5: 105, 6: 106}
    altered = [*copies[:2], rec(2, wire(105, b"order-X"), key=wire(106, b"k")), copies[3]]

    mismatch = compare_range(
        offsets=OffsetRange(0, 4), source=source, target=altered, translate=translate, schema_ids=ids
    ).mismatch
    assert mismatch.source == source[2] and mismatch.target == altered[2]
    assert mismatch.compared_as_copied == ((6, 106), (5, 105))
    assert mismatch.message(topic="t", partition=0, remote_topic="A.t") == (
        "t[0] offset 2 differs from its copy at A.t[0] offset 2 "
        "(compared as copied: schema ID 6 -> 106, 5 -> 105 rewritten)"
    )

    rogue = [*copies[:2], rec(2, wire(105, b"foreign"), key=wire(106, b"k")), *copies[2:]]
    shifted = translator((0, 0), (2, 3), (3, 4))
    mismatch = compare_range(
        offsets=OffsetRange(0, 4), source=source, target=rogue, translate=shifted, schema_ids=ids
    ).mismatch
    assert (mismatch.reason, mismatch.source, mismatch.target) == ("not on the source", source[2], rogue[2])
    assert mismatch.compared_as_copied == ((6, 106), (5, 105))

    plain = [rec(o) for o in range(4)]
    mismatch = compare_range(
        offsets=OffsetRange(0, 4), source=plain, target=plain[:2], translate=translate, schema_ids=ids
    ).mismatch
    assert mismatch.compared_as_copied == () and "compared as copied" not in mismatch.message(
        topic="t", partition=0, remote_topic="A.t"
    )


def test_different_timestamp_is_a_mismatch_unless_the_target_stamps_its_own():
    source = [rec(0, ts=1000)]
    assert not compare_range(
        offsets=OffsetRange(0, 1), source=source, target=[rec(0, ts=2000)], translate=translator((0, 0))
    ).clean
    assert compare_range(
        offsets=OffsetRange(0, 1), source=source, target=[rec(0, ts=None)], translate=translator((0, 0))
    ).clean


def test_record_written_on_the_target_by_another_producer():
    # The mirror wrote 0-2 at 0-2; a rogue producer wrote offset 3; the mirror's 3-4 landed at 4-5 (sync).
    source = [rec(o) for o in range(5)]
    target = [rec(0, b"v0"), rec(1, b"v1"), rec(2, b"v2"), rec(3, b"rogue"), rec(4, b"v3"), rec(5, b"v4")]
    verdict = compare_range(
        offsets=OffsetRange(0, 5), source=source, target=target, translate=translator((0, 0), (3, 4), (4, 5))
    )
    assert verdict.mismatch.reason == "not on the source"
    assert (verdict.mismatch.source_offset, verdict.mismatch.target_offset) == (3, 3)
    assert verdict.mismatch.target.value == b"rogue" and verdict.mismatch.source.offset == 3
    assert "offset 3 holds a record that is not on the source" in verdict.mismatch.message(
        topic="t", partition=0, remote_topic="A.t"
    )


def test_a_foreign_record_written_between_two_ranges_is_found_with_the_next_one():
    # [0, 3) was verified while its copies ended at target offset 3; then a rogue producer wrote offset 3
    # and the mirror's copies of 3-4 landed at 4-5 (sync (3, 4)). The next range reads the target from 3.
    source = [rec(3), rec(4)]
    target = [rec(3, b"rogue"), rec(4, b"v3"), rec(5, b"v4")]
    translate = translator((0, 0), (3, 4), (4, 5))
    assert translate(3) == 4  # reading from translate(start) alone would miss it
    verdict = compare_range(offsets=OffsetRange(3, 5), source=source, target=target, translate=translate)
    assert verdict.mismatch.reason == "not on the source"
    assert (verdict.mismatch.source_offset, verdict.mismatch.target_offset) == (3, 3)


def test_duplicates_of_an_at_least_once_restart_are_not_mismatches():
    # Wrote 0-5 at 0-5, crashed, re-sent from 3: copies at 6-8 (sync (3, 6) rewinds).
    source = [rec(o) for o in range(3)]
    target = [rec(d, b"v%d" % u) for u, d in ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5))]
    lookahead = [rec(o) for o in range(3, 6)]
    verdict = compare_range(
        offsets=OffsetRange(0, 3),
        source=source,
        target=target,
        translate=translator((0, 0), (3, 6)),
        lookahead=lookahead,
    )
    assert verdict.clean and verdict.duplicates == 3


def test_missing_record_on_the_target():
    source = [rec(o) for o in range(3)]
    verdict = compare_range(
        offsets=OffsetRange(0, 3),
        source=source,
        target=[rec(0, b"v0"), rec(2, b"v2")],
        translate=translator((0, 0), (2, 2)),
    )
    assert verdict.mismatch.reason == "missing on target" and verdict.mismatch.source_offset == 1


def test_empty_range_is_rejected():
    with pytest.raises(ValueError):
        OffsetRange(5, 5)


# -- folding a run ----------------------------------------------------------------------------------------
def verdict(start: int, end: int, *, clean: bool = True):
    source = [rec(o) for o in range(start, end)]
    target = [rec(o, b"v%d" % o if clean or o != start else b"x") for o in range(start, end)]
    return compare_range(
        offsets=OffsetRange(start, end),
        source=source,
        target=target,
        translate=translator((0, 0), (end, end)),
    )


def fold(progress, plan, hot, samples=()):
    return fold_verdicts(
        topic="t",
        partition=0,
        remote_topic="A.t",
        progress=progress,
        plan=plan,
        hot=hot,
        samples=samples,
        sync=(9, 9),
    )


def test_fold_moves_verified_up_to_over_clean_ranges_and_stops_at_a_mismatch():
    progress = PartitionProgress(0, 100)
    plan = plan_ranges(progress=progress, low=0, end=400, limits=LIMITS)
    outcome = fold(progress, plan, [verdict(100, 200), verdict(200, 300)])  # the budget stopped it at 300
    assert (outcome.status, outcome.verified_from, outcome.verified_up_to) == ("ok", 0, 300)
    assert outcome.records_verified == 200 and outcome.ranges_verified == 2 and outcome.verified_clean

    outcome = fold(progress, plan, [verdict(100, 200), verdict(200, 300, clean=False)])
    assert (outcome.status, outcome.verified_up_to, outcome.recheck) == (
        "mismatch",
        200,
        OffsetRange(200, 300),
    )
    assert outcome.mismatch.source_offset == 200 and "offset 200 differs" in outcome.reason


def test_fold_a_clean_recheck_resolves_the_mismatch():
    progress = PartitionProgress(0, 200, recheck=OffsetRange(200, 300))
    plan = plan_ranges(progress=progress, low=0, end=400, limits=LIMITS)
    assert fold(progress, plan, [verdict(200, 300, clean=False)]).status == "mismatch"
    outcome = fold(progress, plan, [verdict(200, 300)])
    assert (outcome.status, outcome.verified_up_to, outcome.recheck) == ("ok", 300, None)


def test_fold_a_recheck_put_off_keeps_the_mismatch():
    progress = PartitionProgress(0, 200, recheck=OffsetRange(200, 300))
    plan = plan_ranges(progress=progress, low=0, end=400, limits=LIMITS)
    outcome = fold(progress, plan, [])
    assert (outcome.status, outcome.recheck, outcome.mismatch) == ("mismatch", OffsetRange(200, 300), None)
    assert outcome.verified_up_to == 200


def test_fold_first_run_and_cold_sample_mismatch():
    plan = plan_ranges(progress=PartitionProgress(), low=0, end=5000, limits=LIMITS, seed=1)
    outcome = fold(PartitionProgress(), plan, [verdict(4000, 4100)])
    assert (outcome.verified_from, outcome.verified_up_to) == (4000, 4100)
    sample = plan.samples[0]
    outcome = fold(
        PartitionProgress(), plan, [verdict(4000, 4100)], [verdict(sample.start, sample.end, clean=False)]
    )
    assert outcome.status == "mismatch" and outcome.recheck == sample and outcome.verified_up_to == 4100


def test_fold_with_nothing_verifiable_is_pending():
    plan = plan_ranges(progress=PartitionProgress(), low=0, end=0, limits=LIMITS)
    assert fold(PartitionProgress(), plan, []).status == "pending"


def test_evidence_of_a_record_with_nul_bytes_is_text_a_database_stores():
    """A record any client may write: NUL in its key, value and a header name (PostgreSQL refuses NUL in
    text and JSON: one such record made a whole verification run's transaction fail)."""
    record = MirroredRecord(offset=0, key=b"\x00\x01", value=b"ok\x00", headers=(("h\x00", b"v"),))
    evidence = record.as_evidence()
    assert evidence["key"] == "0x0001" and evidence["value"] == "0x6f6b00"
    assert evidence["headers"] == [["h\\x00", "v"]]
    assert "\x00" not in repr(evidence)


def test_topic_parity_leaves_out_a_remote_topic_the_target_lists_but_could_not_describe():
    """A remote topic just created is listed by one broker before another can describe it: that
    observation is not "missing on B" (a readiness reason, 20 points); a topic not listed is."""
    from replication.config import FlowConfig
    from replication.connector import TopicDescription, TopicSelection
    from replication.policy import replication_policy_for
    from replication.verification_reads import TopicsRead, topic_parity

    flow = FlowConfig(source="A", target="B", enabled=True, topics=("orders", "payments", "refunds"))
    selection = TopicSelection.of(flow, replication_policy_for(flow, known_aliases=("A", "B")))
    source_counts = {"orders": 2, "payments": 2, "refunds": 2}
    source = TopicsRead(
        lambda: dict(source_counts), lambda asked: {n: TopicDescription(n, c, {}) for n, c in asked.items()}
    )

    def target(describable: set[str]) -> TopicsRead:
        counts = {"A.orders": 2, "A.payments": 1}
        return TopicsRead(
            lambda: dict(counts),
            lambda asked: {n: TopicDescription(n, c, {}) for n, c in asked.items() if n in describable},
        )

    def parity(describable: set[str]):
        return topic_parity(
            flow,
            selection,
            target_alias="B",
            source=source,
            target=target(describable),
            target_brokers=lambda: 1,
        )

    assert parity({"A.orders", "A.payments"}) == (
        ["A.refunds missing on B", "A.payments: 1 partitions, 2 on the source"],
        [],
    )
    assert parity({"A.payments"}) == (
        ["A.refunds missing on B", "A.payments: 1 partitions, 2 on the source"],
        [],
    )  # A.orders listed, not described: neither missing nor a problem
    assert parity(set()) == (["A.refunds missing on B"], [])
