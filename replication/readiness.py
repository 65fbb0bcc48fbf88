"""Failover readiness: would a failover of this flow work now, and how well? A score 0-100 with reasons.

`readiness_score` is a pure function of a flow's facts (time passed in). Each check gives a reason with
its status (ok, warn, fail, unknown, n/a) and the points it costs; the score is 100 minus the points,
at least 0. The checks are what careful failover runbooks ask before the button is pressed:

| check | costs | why |
|---|---|---|
| replication_running | 35 when no worker has reported within the stale limit | nothing replicates: the target falls further behind every second, unseen |
| offset_sync_coverage | up to 30 (5 while unknown) | a partition without an offset sync has no exact translation: its groups re-read or skip |
| offset_sync_freshness | 25 | records replicated long after the newest sync: offsets after it translate inexactly |
| verification | 30 on a mismatch; 5 never verified, partly verified or stale | the target's data differs from the source's |
| rpo | 25 over the seconds budget, 15 over the records budget; 20 when stale | what a failover now would lose |
| target_groups_inactive | 10 per group active on the target, up to 20 (an observation past the verification age limit: unknown, what it saw still counts) | offsets are only written for inactive groups |
| checkpoint_freshness | 10 stale, 5 disabled (none emitted yet: n/a, no group to checkpoint) | consumers that read checkpoints (MM2's RemoteClusterUtils) get old offsets |
| reverse_flow | 5 when absent (failback creates it) or missing topics (failback adds them) | failback |
| topic_parity | 20 for missing or smaller remote topics, 5 for differing configs (stale: as the groups) | consumers on the target see other partitions or configs |
| acl_parity | 5 when ACL sync is off; n/a where a cluster has no authorizer | clients refused on the target |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from replication.rpo_budget import records_over, records_over_text, seconds_over, seconds_over_text

OK, WARN, FAIL, UNKNOWN, NOT_APPLICABLE = "ok", "warn", "fail", "unknown", "n/a"


@dataclass(frozen=True)
class ReadinessLimits:
    offset_sync_max_lag_s: float = 60.0  # as the offset_syncs_stopped alert rule
    verification_max_age_s: float = 300.0  # a verification older than this is stale
    checkpoint_min_age_s: float = 60.0  # checkpoints are stale past max(3 intervals, this)


@dataclass(frozen=True)
class ReadinessFacts:
    """One flow; times are epoch seconds, None when never observed or unknown."""

    partitions: int  # replicated partitions (status rows)
    partitions_with_sync: int | None = None  # None: the verifier has not read the offset syncs yet
    offset_sync_at: float | None = None
    records_replicated_at: float | None = None
    partitions_verified: int = 0  # with a verified range
    mismatches: Sequence[str] = ()  # one line per partition in mismatch
    verified_at: float | None = None  # the newest verification check
    status_fresh: bool = True  # the live figures are not STALE / UNKNOWN
    silent_for_s: float | None = None  # it should replicate and its reports stopped this long ago (STALE)
    seconds_behind: float | None = None
    records_behind: int | None = None
    budget_seconds: float = 60.0
    budget_records: int | None = None
    groups_active_on_target: Sequence[str] | None = None  # None: not observed
    checkpoints_enabled: bool = True
    checkpoint_interval_s: float = 60.0
    checkpoint_at: float | None = None
    reverse_flow: str | None = None  # the reverse flow's name, None when there is none
    topics_not_brought_home: Sequence[str] = ()  # source topics the reverse flow would not replicate back
    partition_problems: Sequence[str] | None = None  # None: not observed
    config_problems: Sequence[str] | None = None
    # When the verifier observed the groups active on the target and the topic parity above (None: no
    # age known); past `verification_max_age_s` the observation is stale: a problem it saw is still shown,
    # with its age, and its "no problem" no longer counts as ok.
    observed_at: float | None = None
    acl_sync_enabled: bool = True
    acl_unsupported: str | None = None  # a cluster's "ACL sync unsupported" reason


@dataclass(frozen=True)
class Reason:
    check: str
    status: str
    points: int  # what it costs the score
    message: str


@dataclass(frozen=True)
class Readiness:
    score: int
    reasons: tuple[Reason, ...]

    @property
    def problems(self) -> tuple[Reason, ...]:
        """The reasons that cost points, worst first."""
        return tuple(sorted((r for r in self.reasons if r.points), key=lambda r: -r.points))


def _listing(items: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def replication_running(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "replication_running"
    if facts.silent_for_s is not None:
        return Reason(
            check,
            FAIL,
            35,
            f"no worker has reported for {facts.silent_for_s:.0f} s: nothing replicates, the target falls "
            "further behind every second",
        )
    if facts.partitions == 0:
        return Reason(check, NOT_APPLICABLE, 0, "no partition replicated yet")
    return Reason(check, OK, 0, "workers report on every partition")


def offset_sync_coverage(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "offset_sync_coverage"
    if facts.partitions == 0:
        return Reason(check, NOT_APPLICABLE, 0, "no partition replicated yet")
    if facts.partitions_with_sync is None:
        return Reason(check, UNKNOWN, 5, "offset syncs not read yet: exact translation unproven")
    missing = facts.partitions - facts.partitions_with_sync
    if missing <= 0:
        return Reason(
            check, OK, 0, f"every partition ({facts.partitions}) has an offset sync: exact translation"
        )
    points = max(1, round(30 * missing / facts.partitions))
    return Reason(
        check,
        FAIL,
        points,
        f"{missing} of {facts.partitions} partitions have no offset sync: no exact translation",
    )


def offset_sync_freshness(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "offset_sync_freshness"
    if facts.records_replicated_at is None:
        return Reason(check, OK, 0, "nothing replicated since the newest offset sync")
    if facts.offset_sync_at is None:
        return Reason(check, FAIL, 25, "records replicated and no offset sync ever emitted")
    lag = facts.records_replicated_at - facts.offset_sync_at
    if lag > limits.offset_sync_max_lag_s:
        return Reason(
            check,
            FAIL,
            25,
            f"records replicated {lag:.0f} s after the newest offset sync (limit "
            f"{limits.offset_sync_max_lag_s:g} s): newer offsets translate inexactly",
        )
    return Reason(check, OK, 0, f"newest offset sync {max(now - facts.offset_sync_at, 0):.0f} s old")


def verification(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "verification"
    if facts.mismatches:
        return Reason(check, FAIL, 30, f"target differs from source: {_listing(facts.mismatches)}")
    if facts.partitions == 0:
        return Reason(check, NOT_APPLICABLE, 0, "no partition replicated yet")
    if facts.partitions_verified == 0 or facts.verified_at is None:
        return Reason(check, UNKNOWN, 5, "no range verified yet")
    age = max(now - facts.verified_at, 0.0)
    if age > limits.verification_max_age_s:
        return Reason(check, WARN, 5, f"last verified {age:.0f} s ago (the verifier is not running?)")
    if facts.partitions_verified < facts.partitions:
        return Reason(
            check,
            WARN,
            5,
            f"{facts.partitions - facts.partitions_verified} of {facts.partitions} partitions not verified yet",
        )
    return Reason(check, OK, 0, f"every partition verified, last {age:.0f} s ago")


def rpo(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "rpo"
    if facts.partitions == 0:
        return Reason(check, NOT_APPLICABLE, 0, "no partition replicated yet")
    if not facts.status_fresh or facts.seconds_behind is None:
        return Reason(check, FAIL, 20, "live figures stale or unknown: what a failover would lose is unknown")
    if seconds_over(seconds_behind=facts.seconds_behind, budget_s=facts.budget_seconds):
        text = seconds_over_text(seconds_behind=facts.seconds_behind, budget_s=facts.budget_seconds)
        return Reason(check, FAIL, 25, text)
    if records_over(records_behind=facts.records_behind, budget_records=facts.budget_records):
        text = records_over_text(records_behind=facts.records_behind, budget_records=facts.budget_records)
        return Reason(check, FAIL, 15, text)
    return Reason(
        check, OK, 0, f"{facts.seconds_behind:.1f} s behind, within the budget of {facts.budget_seconds:g} s"
    )


def _observation(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> tuple[str, float | None]:
    """The verifier's observation's age as a phrase for a message (empty when unknown), and that age when
    it is stale (past `verification_max_age_s`), else None."""
    if facts.observed_at is None:
        return "", None
    age = max(now - facts.observed_at, 0.0)
    return f" (observed {age:.0f} s ago)", age if age > limits.verification_max_age_s else None


def _not_observed_since(check: str, what: str, stale_s: float) -> Reason:
    return Reason(
        check, UNKNOWN, 0, f"{what} last observed {stale_s:.0f} s ago (the verifier is not running?)"
    )


def target_groups_inactive(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "target_groups_inactive"
    if facts.groups_active_on_target is None:
        return Reason(check, UNKNOWN, 0, "consumer groups on the target not observed yet")
    age, stale_s = _observation(facts, limits, now)
    active = list(facts.groups_active_on_target)
    if active:
        return Reason(
            check,
            FAIL,
            min(20, 10 * len(active)),
            f"{len(active)} group(s) active on the target{age}, their offsets cannot be written: "
            f"{_listing(active)}",
        )
    if stale_s is not None:
        return _not_observed_since(check, "consumer groups on the target", stale_s)
    return Reason(check, OK, 0, f"no replicated group is active on the target{age}")


def checkpoint_freshness(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "checkpoint_freshness"
    if not facts.checkpoints_enabled:
        return Reason(
            check, WARN, 5, "emit.checkpoints.enabled is off: MM2 tools reading checkpoints get none"
        )
    limit = max(3 * facts.checkpoint_interval_s, limits.checkpoint_min_age_s)
    if facts.checkpoint_at is None:  # only groups with offsets to translate are checkpointed
        return Reason(check, NOT_APPLICABLE, 0, "no checkpoint emitted yet (no consumer group to checkpoint)")
    age = max(now - facts.checkpoint_at, 0.0)
    if age > limit:
        return Reason(check, WARN, 10, f"newest checkpoint {age:.0f} s old (limit {limit:g} s)")
    return Reason(check, OK, 0, f"newest checkpoint {age:.0f} s old")


def reverse_flow(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "reverse_flow"
    if facts.reverse_flow is None:
        return Reason(check, WARN, 5, "no reverse flow: failback will create one")
    if facts.topics_not_brought_home:
        return Reason(
            check,
            WARN,
            5,
            f"reverse flow {facts.reverse_flow} does not replicate {_listing(facts.topics_not_brought_home)} "
            "yet: failback will add them",
        )
    return Reason(check, OK, 0, f"reverse flow {facts.reverse_flow} would bring every topic home")


def topic_parity(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "topic_parity"
    if facts.partition_problems is None or facts.config_problems is None:
        return Reason(check, UNKNOWN, 0, "topic partitions and configs not compared yet")
    age, stale_s = _observation(facts, limits, now)
    if facts.partition_problems:
        return Reason(check, FAIL, 20, f"partition counts differ{age}: {_listing(facts.partition_problems)}")
    if facts.config_problems:
        return Reason(check, WARN, 5, f"topic configs differ{age}: {_listing(facts.config_problems)}")
    if stale_s is not None:
        return _not_observed_since(check, "topic partitions and configs", stale_s)
    return Reason(check, OK, 0, f"remote topics have the source's partition counts and configs{age}")


def acl_parity(facts: ReadinessFacts, limits: ReadinessLimits, now: float) -> Reason:
    check = "acl_parity"
    if facts.acl_unsupported:
        return Reason(check, NOT_APPLICABLE, 0, facts.acl_unsupported)
    if not facts.acl_sync_enabled:
        return Reason(check, WARN, 5, "sync.topic.acls.enabled is off: clients may be refused on the target")
    return Reason(check, OK, 0, "topic ACLs synced by the flow")


CHECKS = (
    replication_running,
    offset_sync_coverage,
    offset_sync_freshness,
    verification,
    rpo,
    target_groups_inactive,
    checkpoint_freshness,
    reverse_flow,
    topic_parity,
    acl_parity,
)


def readiness_score(facts: ReadinessFacts, limits: ReadinessLimits, *, now: float) -> Readiness:
    reasons = tuple(check(facts, limits, now) for check in CHECKS)
    return Readiness(max(0, 100 - sum(reason.points for reason in reasons)), reasons)
