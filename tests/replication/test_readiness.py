"""Failover readiness: the score and one test for each reason it gives."""

from __future__ import annotations

from dataclasses import replace

from replication.readiness import (
    FAIL,
    NOT_APPLICABLE,
    OK,
    UNKNOWN,
    WARN,
    ReadinessFacts,
    ReadinessLimits,
    readiness_score,
)

NOW = 10_000.0
LIMITS = ReadinessLimits()
READY = ReadinessFacts(
    partitions=4,
    partitions_with_sync=4,
    offset_sync_at=NOW - 2,
    records_replicated_at=NOW - 1,
    partitions_verified=4,
    verified_at=NOW - 5,
    seconds_behind=0.5,
    records_behind=3,
    budget_seconds=60,
    groups_active_on_target=(),
    checkpoint_at=NOW - 10,
    reverse_flow="B->A",
    partition_problems=(),
    config_problems=(),
    observed_at=NOW - 30,
)


def reason(facts: ReadinessFacts, check: str):
    readiness = readiness_score(facts, LIMITS, now=NOW)
    found = next(r for r in readiness.reasons if r.check == check)
    return readiness.score, found


def test_a_ready_flow_scores_100_with_every_reason_ok():
    readiness = readiness_score(READY, LIMITS, now=NOW)
    assert readiness.score == 100 and readiness.problems == ()
    assert {r.status for r in readiness.reasons} == {OK}


def test_partitions_without_offset_sync():
    score, found = reason(replace(READY, partitions_with_sync=2), "offset_sync_coverage")
    assert (found.status, found.points, score) == (FAIL, 15, 85) and "2 of 4" in found.message
    assert reason(replace(READY, partitions_with_sync=None), "offset_sync_coverage")[1].status == UNKNOWN


def test_offset_syncs_stopped():
    score, found = reason(replace(READY, offset_sync_at=NOW - 200), "offset_sync_freshness")
    assert (found.status, found.points, score) == (FAIL, 25, 75) and "inexactly" in found.message


def test_verification_mismatch_unverified_and_stale():
    score, found = reason(replace(READY, mismatches=("orders[0] offset 3 differs",)), "verification")
    assert (found.status, found.points, score) == (FAIL, 30, 70) and "offset 3" in found.message
    assert reason(replace(READY, partitions_verified=0), "verification")[1].points == 5
    assert reason(replace(READY, partitions_verified=3), "verification")[1].status == WARN
    assert reason(replace(READY, verified_at=NOW - 1000), "verification")[1].status == WARN


def test_rpo_over_budget_and_stale():
    score, found = reason(replace(READY, seconds_behind=90.0), "rpo")
    assert (found.status, found.points, score) == (FAIL, 25, 75) and "budget of 60 s" in found.message
    assert reason(replace(READY, budget_records=2), "rpo")[1].points == 15
    assert reason(replace(READY, status_fresh=False), "rpo")[1].points == 20


def test_groups_active_on_the_target():
    score, found = reason(replace(READY, groups_active_on_target=("billing",)), "target_groups_inactive")
    assert (found.status, found.points, score) == (FAIL, 10, 90) and "billing" in found.message
    assert (
        reason(replace(READY, groups_active_on_target=("a", "b", "c")), "target_groups_inactive")[1].points
        == 20
    )


def test_checkpoints_stale_or_disabled():
    score, found = reason(replace(READY, checkpoint_at=NOW - 500), "checkpoint_freshness")
    assert (found.status, found.points, score) == (WARN, 10, 90)
    assert reason(replace(READY, checkpoints_enabled=False), "checkpoint_freshness")[1].points == 5
    assert reason(replace(READY, checkpoint_at=None), "checkpoint_freshness")[1].status == NOT_APPLICABLE


def test_reverse_flow_absent_or_incomplete():
    assert reason(replace(READY, reverse_flow=None), "reverse_flow")[1].points == 5
    score, found = reason(replace(READY, topics_not_brought_home=("orders",)), "reverse_flow")
    assert (found.status, found.points) == (WARN, 5) and "failback will add" in found.message


def test_topic_partition_and_config_parity():
    score, found = reason(
        replace(READY, partition_problems=("A.orders: 2 partitions, source 4",)), "topic_parity"
    )
    assert (found.status, found.points) == (FAIL, 20)
    assert reason(replace(READY, config_problems=("A.orders retention.ms",)), "topic_parity")[1].points == 5


def test_the_verifiers_observations_say_their_age_and_a_stale_one_is_no_longer_ok():
    """The groups active on the target and the topic parity are what the verifier last observed (about
    once a minute). Each says how old it is; once older than the verification limit (the verifier stopped)
    "no problem" is unknown, never ok, and a problem it saw is still shown, with its age."""
    for check in ("target_groups_inactive", "topic_parity"):
        assert (
            reason(READY, check)[1].status == OK and "(observed 30 s ago)" in reason(READY, check)[1].message
        )
        score, found = reason(replace(READY, observed_at=NOW - 900), check)
        assert (found.status, found.points, score) == (UNKNOWN, 0, 100), found
        assert "last observed 900 s ago" in found.message and "verifier is not running" in found.message
    stale = replace(READY, observed_at=NOW - 900)
    _, groups = reason(replace(stale, groups_active_on_target=("billing",)), "target_groups_inactive")
    assert (groups.status, groups.points) == (FAIL, 10) and "(observed 900 s ago)" in groups.message
    _, parity = reason(replace(stale, partition_problems=("A.orders missing on B",)), "topic_parity")
    assert (parity.status, parity.points) == (FAIL, 20) and "(observed 900 s ago)" in parity.message
    assert reason(replace(READY, observed_at=None), "topic_parity")[1].status == OK  # no age known


def test_acl_parity_not_applicable_without_an_authorizer():
    found = reason(replace(READY, acl_unsupported="ACL sync unsupported by cluster B"), "acl_parity")[1]
    assert (found.status, found.points) == (NOT_APPLICABLE, 0)
    assert reason(replace(READY, acl_sync_enabled=False), "acl_parity")[1].points == 5


def test_score_never_below_zero_and_problems_worst_first():
    broken = replace(
        READY,
        partitions_with_sync=0,
        offset_sync_at=None,
        mismatches=("x",),
        status_fresh=False,
        groups_active_on_target=("a", "b"),
        reverse_flow=None,
        partition_problems=("p",),
    )
    readiness = readiness_score(broken, LIMITS, now=NOW)
    assert readiness.score == 0
    assert [r.points for r in readiness.problems] == sorted(
        (r.points for r in readiness.problems), reverse=True
    )


def test_a_stopped_runtime_scores_below_the_readiness_low_threshold():
    """Every worker and beat stopped: the figures go stale, nothing is verified any more (issue 28: it
    scored 75, above readiness_low's 70)."""
    stopped = replace(READY, status_fresh=False, silent_for_s=300.0, verified_at=NOW - 1000)
    score, found = reason(stopped, "replication_running")
    assert (found.status, found.points) == (FAIL, 35) and "no worker has reported for 300 s" in found.message
    assert score < 70
    assert reason(READY, "replication_running")[1].status == OK
    assert reason(replace(READY, partitions=0), "replication_running")[1].status == NOT_APPLICABLE
