"""The failover decisions without I/O: records at risk, checklist, group translation, drain, failback."""

from __future__ import annotations

import re

from replication.checkpoint import ABSENT, CommittedOffset
from replication.failover import (
    Check,
    CheckStatus,
    OffsetOrigin,
    PartitionObservation,
    UnreplicatedRecord,
    build_plan,
    drain_progress,
    failback_offsets,
    group_plan_from_checkpoints,
    group_plan_from_source,
    partition_plan,
    records_at_risk,
    remote_topics_exclude,
    seconds_behind,
)
from replication.formats import Checkpoint, OffsetSync
from replication.offset_sync_store import OffsetSyncStore

NOW = 1_700_000_000.0


def observation(**changes) -> PartitionObservation:
    values = {"topic": "orders", "partition": 0, "remote_topic": "A.orders", "source_end": 10}
    return PartitionObservation(**(values | changes))


def store_with_gap() -> OffsetSyncStore:
    """orders[0]: upstream 0..4 at 0..4, a transaction marker at 5, upstream 6..9 at 5..8."""
    store = OffsetSyncStore()
    store.update_all(
        [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 6, 5), OffsetSync("orders", 0, 9, 8)]
    )
    return store


# -- partitions -----------------------------------------------------------------------------------------
def test_nothing_at_risk_when_no_record_waits_after_the_replicated_position():
    assert records_at_risk(observation(replicated_offset=9)) == 0
    assert seconds_behind(observation(replicated_offset=9), now=NOW) == 0.0


def test_records_at_risk_and_seconds_behind_start_at_the_first_unreplicated_record():
    waiting = observation(first_unreplicated=UnreplicatedRecord(7, int((NOW - 12.5) * 1000)))
    assert records_at_risk(waiting) == 3
    assert seconds_behind(waiting, now=NOW) == 12.5


def test_a_record_past_a_too_low_listed_end_still_counts():
    assert records_at_risk(observation(first_unreplicated=UnreplicatedRecord(10, None))) == 1


def test_source_unreachable_uses_the_last_known_lag():
    down = observation(source_end=None, last_known_lag=4)
    assert records_at_risk(down) == 4
    assert seconds_behind(down, now=NOW) is None
    assert records_at_risk(observation(source_end=None)) is None


def test_records_arriving_between_the_two_samples():
    assert partition_plan(observation(source_end_later=13), now=NOW).records_arriving == 3
    assert partition_plan(observation(source_end_later=10), now=NOW).records_arriving == 0


# -- groups ---------------------------------------------------------------------------------------------
def test_group_offsets_translate_exactly_across_an_upstream_gap():
    plan = group_plan_from_source(
        group="g",
        committed={("orders", 0): CommittedOffset(7), ("other", 0): CommittedOffset(3)},
        remote_topics={"orders": "A.orders"},
        store=store_with_gap(),
        target_state=ABSENT,
        target_committed={},
    )
    (row,) = plan.partitions  # `other` is not replicated by the flow
    assert (row.source_offset, row.translated_offset, row.origin) == (7, 6, OffsetOrigin.COMMITTED)
    assert plan.offsets_to_write() == {("A.orders", 0): 6}


def test_a_committed_offset_on_a_transaction_marker_resumes_at_the_next_record():
    plan = group_plan_from_source(
        group="g",
        committed={("orders", 0): CommittedOffset(5)},
        remote_topics={"orders": "A.orders"},
        store=store_with_gap(),
        target_state="EMPTY",
        target_committed={},
    )
    assert plan.offsets_to_write() == {("A.orders", 0): 5}  # the copy of upstream 6


def test_nothing_is_written_for_a_group_active_on_the_target_or_already_ahead():
    common = {
        "group": "g",
        "committed": {("orders", 0): CommittedOffset(7)},
        "remote_topics": {"orders": "A.orders"},
        "store": store_with_gap(),
    }
    active = group_plan_from_source(**common, target_state="STABLE", target_committed={})
    assert active.active_on_target and active.offsets_to_write() == {}
    ahead = group_plan_from_source(
        **common, target_state="EMPTY", target_committed={("A.orders", 0): CommittedOffset(8)}
    )
    assert ahead.offsets_to_write() == {} and "ahead" in ahead.partitions[0].note
    same = group_plan_from_source(
        **common, target_state="EMPTY", target_committed={("A.orders", 0): CommittedOffset(6)}
    )
    assert same.offsets_to_write() == {} and "already" in same.partitions[0].note


def test_offsets_older_than_every_sync_are_not_guessed():
    store = OffsetSyncStore()
    store.update(OffsetSync("orders", 0, 100, 0))
    plan = group_plan_from_source(
        group="g",
        committed={("orders", 0): CommittedOffset(50)},
        remote_topics={"orders": "A.orders"},
        store=store,
        target_state=ABSENT,
        target_committed={},
    )
    assert plan.untranslatable == (("orders", 0),) and plan.offsets_to_write() == {}


def test_without_the_source_the_newest_checkpoint_is_used():
    checkpoints = {("A.orders", 0): Checkpoint("g", "A.orders", 0, 7, 6)}
    plan = group_plan_from_checkpoints(
        group="g",
        checkpoints=checkpoints,
        source_topics={"A.orders": "orders"},
        store=None,
        target_state=ABSENT,
        target_committed={},
    )
    (row,) = plan.partitions
    assert (row.topic, row.source_offset, row.translated_offset) == ("orders", 7, 6)
    assert row.origin == OffsetOrigin.CHECKPOINT and "checkpoint" in row.note
    assert plan.offsets_to_write() == {("A.orders", 0): 6}


# -- checklist ------------------------------------------------------------------------------------------
def plan_for(observations, *, groups=(), source_reachable=True, missing=()):
    return build_plan(
        flow="A->B",
        target_alias="B",
        now=NOW,
        source_reachable=source_reachable,
        source_detail="1 broker(s)",
        target_reachable=True,
        target_detail="1 broker(s)",
        observations=observations,
        groups=list(groups),
        missing_remote_topics=list(missing),
        arrival_window_s=1.0,
        heartbeat_ms=int((NOW - 2) * 1000),
    )


def statuses(plan) -> dict[Check, CheckStatus]:
    return {item.check: item.status for item in plan.checklist}


def idle_group(state="EMPTY"):
    return group_plan_from_source(
        group="g",
        committed={("orders", 0): CommittedOffset(7)},
        remote_topics={"orders": "A.orders"},
        store=store_with_gap(),
        target_state=state,
        target_committed={},
    )


def test_every_check_passes_when_caught_up_and_quiet():
    plan = plan_for([observation(source_end_later=10)], groups=[idle_group()])
    assert set(statuses(plan).values()) == {CheckStatus.PASS}
    assert plan.failed_checks == () and plan.records_at_risk == 0 and plan.heartbeat_age_s == 2.0
    assert [item.check for item in plan.checklist] == list(Check)


def test_lag_warns_while_the_source_answers_and_fails_when_it_does_not():
    behind = plan_for(
        [observation(source_end_later=10, first_unreplicated=UnreplicatedRecord(8, int(NOW * 1000)))],
        groups=[idle_group()],
    )
    assert statuses(behind)[Check.LAG_ZERO] == CheckStatus.WARN
    assert "2 record(s)" in behind.check(Check.LAG_ZERO).explanation
    down = plan_for(
        [observation(source_end=None, last_known_lag=3)], groups=[idle_group()], source_reachable=False
    )
    assert statuses(down)[Check.SOURCE_REACHABLE] == CheckStatus.WARN
    assert statuses(down)[Check.LAG_ZERO] == CheckStatus.FAIL
    assert statuses(down)[Check.PRODUCERS_STOPPED] == CheckStatus.WARN
    assert "3 record(s)" in down.check(Check.LAG_ZERO).explanation and down.records_at_risk == 3


def test_producers_still_writing_fail_the_check():
    plan = plan_for([observation(source_end_later=15)], groups=[idle_group()])
    assert statuses(plan)[Check.PRODUCERS_STOPPED] == CheckStatus.FAIL
    assert "5 record(s) arrived" in plan.check(Check.PRODUCERS_STOPPED).explanation


def test_a_group_active_on_the_target_and_a_missing_remote_topic_fail():
    plan = plan_for([observation(source_end_later=10)], groups=[idle_group("STABLE")], missing=["A.orders"])
    assert statuses(plan)[Check.GROUPS_INACTIVE_ON_TARGET] == CheckStatus.FAIL
    assert "g (STABLE)" in plan.check(Check.GROUPS_INACTIVE_ON_TARGET).explanation
    assert statuses(plan)[Check.TARGET_HEALTHY] == CheckStatus.FAIL


# -- drain ----------------------------------------------------------------------------------------------
def test_drained_only_when_no_record_waits():
    waiting = observation(first_unreplicated=UnreplicatedRecord(8, None))
    progress = drain_progress(
        observations=[waiting], ends_at_start={("orders", 0): 10}, producers_stopped=True
    )
    assert not progress.done and progress.records_remaining == 2
    assert progress.partitions_remaining == (("orders", 0),)
    done = drain_progress(
        observations=[observation()], ends_at_start={("orders", 0): 10}, producers_stopped=True
    )
    assert done.done


def test_with_producers_running_only_records_before_the_start_are_awaited():
    newer = observation(first_unreplicated=UnreplicatedRecord(10, None))
    ends = {("orders", 0): 10}
    assert drain_progress(observations=[newer], ends_at_start=ends, producers_stopped=False).done
    # Producers stopped: nothing new can come, so any record left (even past a too-low end) is awaited.
    assert not drain_progress(observations=[newer], ends_at_start=ends, producers_stopped=True).done


# -- failback -------------------------------------------------------------------------------------------
def test_translate_upstream_inverts_the_syncs():
    store = store_with_gap()
    assert [store.translate_upstream("orders", 0, d) for d in (0, 4, 5, 8, 9)] == [0, 4, 6, 9, 10]
    assert store.translate_upstream("orders", 0, 20) == 10  # past the newest sync: never a skip
    assert store.translate_upstream("unknown", 0, 3) is None


def test_failback_offsets_translate_back_and_never_move_backwards():
    offsets, untranslatable = failback_offsets(
        target_committed={("A.orders", 0): CommittedOffset(6), ("local", 0): CommittedOffset(3)},
        source_topics={"A.orders": "orders"},
        store=store_with_gap(),
        source_committed={("orders", 0): CommittedOffset(2)},
    )
    assert offsets == {("orders", 0): 7} and untranslatable == []
    kept, _ = failback_offsets(
        target_committed={("A.orders", 0): CommittedOffset(6)},
        source_topics={"A.orders": "orders"},
        store=store_with_gap(),
        source_committed={("orders", 0): CommittedOffset(9)},
    )
    assert kept == {}


def test_the_reverse_flow_excludes_exactly_the_mirrored_topics():
    pattern = remote_topics_exclude(source_alias="A", separator=".")
    assert re.fullmatch(pattern, "A.orders") and not re.fullmatch(pattern, "Aorders")
    assert not re.fullmatch(pattern, "B.orders")
