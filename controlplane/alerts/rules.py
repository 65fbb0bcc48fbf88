"""The alert rules Mirrorplane evaluates itself: pure decisions over one flow's facts, time passed in.

Each rule is a function `(facts, limits, now) -> Verdict`: whether it fires, the figure it judged (with
when that figure was observed), the threshold, and a sentence an on-call engineer can act on. No I/O:
`controlplane.alerts` gathers the facts (the live status selectors, budgets, runtime signals, leases)
and turns verdicts into alert instances. deploy/prometheus ships the same rules over the same figures
(docs/alerts.md lists both side by side).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from replication.rpo_budget import records_over, records_over_text, seconds_over, seconds_over_text

# The rules' names: what an alert stores (`AlertRule`, controlplane/alerts/models.py, takes its values
# from here) and what a receiver is sent.
RPO_SECONDS = "rpo_seconds_exceeded"
RPO_RECORDS = "rpo_records_exceeded"
STALE_STATUS = "stale_status"
HEARTBEAT_MISSING = "heartbeat_missing"
DATA_LOSS_GAP = "data_loss_gap"
FLOW_FAULTED = "flow_faulted"
NO_LEASE_HOLDER = "no_lease_holder"
POOL_WITHOUT_WORKERS = "pool_without_workers"
OFFSET_SYNCS_STOPPED = "offset_syncs_stopped"
VERIFICATION_MISMATCH = "verification_mismatch"
READINESS_LOW = "readiness_low"

STALE = "STALE"
UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Limits:
    """The thresholds that are not per flow (settings ALERTS_*)."""

    stale_after_s: float
    heartbeat_min_age_s: float = 30.0  # heartbeats missing: older than max(3 intervals, this)
    offset_sync_max_lag_s: float = 60.0  # records replicated this long after the newest offset sync
    data_loss_window_s: float = 3600.0  # a gap fires for this long after it happened
    readiness_below: float = 70.0  # failover readiness score that fires readiness_low
    readiness_grace_s: float = 120.0  # a flow runnable for less than this is still being verified


@dataclass(frozen=True)
class FlowFacts:
    """One flow as the evaluation sees it; times are epoch seconds, None when never observed."""

    runnable: bool  # a state the workers replicate (active, faulted, failing over)
    runnable_since: float  # when it entered its state (or was created)
    state: str
    state_reason: str
    status: str  # the live roll-up: OK, WARN, STALE, ERR or UNKNOWN
    records_behind: int | None
    seconds_behind: float | None  # the flow's, or its known lower bound when seconds_behind_undated
    observed_at: float | None  # of the newest status report
    budget_seconds: float
    budget_records: int | None
    heartbeats_enabled: bool = False
    heartbeat_interval_s: float = 1.0
    heartbeat_at: float | None = None
    offset_sync_at: float | None = None
    records_replicated_at: float | None = None
    tasks_planned: int | None = None  # None: not observed (Redis away)
    tasks_leased: int | None = None
    tasks_observed_at: float | None = None
    replication_workers: int | None = None  # alive on the flow's pool queue; None: Redis away
    pool: str = ""  # its worker pool (controlplane.flows.pools); empty: the default pool
    pool_workers: int | None = None  # live workers consuming the pool's queue; None: Redis away
    gaps_recent: int = 0  # data-loss gaps within the window
    lost_records_recent: int = 0
    last_gap_at: float | None = None
    seconds_behind_undated: bool = False  # a partition behind has no known age: the figure is a lower bound
    mismatches: tuple[str, ...] = ()  # verification: one line per partition whose target copy differs
    mismatch_checked_at: float | None = None
    readiness_score: int | None = None  # failover readiness (controlplane.assurance), None: not computed
    readiness_problems: tuple[str, ...] = ()  # its reasons that cost points, worst first


@dataclass(frozen=True)
class Verdict:
    firing: bool
    figure: float | None = None
    threshold: float | None = None
    unit: str = ""
    observed_at: float | None = None
    message: str = ""
    unknown: bool = False  # the figure it judges is not known: an alert already firing is kept, not resolved


QUIET = Verdict(False)
NEVER_REPORTED_GRACE = 3  # stale limits a flow with tasks may go without its first report


def _fresh(facts: FlowFacts) -> bool:
    return facts.status not in (STALE, UNKNOWN) and facts.observed_at is not None


def _not_judged(facts: FlowFacts, figure: str) -> Verdict:
    """A budget rule's verdict on figures it cannot judge (stale, or not known yet): neither firing nor
    back within the budget, so an alert already firing stays firing (`stale_status` speaks for stale
    figures). A flow caught up while its reports were late resolves at its next fresh report."""
    if facts.observed_at is None or facts.status == UNKNOWN:
        why = "no status report yet"
    elif facts.status == STALE:
        why = "the newest status report is stale"
    else:
        why = "waiting for the first fetch"
    return Verdict(False, unknown=True, message=f"{figure} not known: {why}")


def rpo_seconds(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """seconds_behind (fresh) above the flow's budget. While a partition behind has no known age yet, the
    known partitions' worst is a lower bound of the flow's: over the budget, the flow is too."""
    if not facts.runnable:
        return QUIET
    if not _fresh(facts) or facts.seconds_behind is None:  # never judged within the budget
        return _not_judged(facts, "seconds behind")
    figure, budget = facts.seconds_behind, facts.budget_seconds
    return Verdict(
        seconds_over(seconds_behind=figure, budget_s=budget),
        figure,
        budget,
        "seconds",
        facts.observed_at,
        seconds_over_text(seconds_behind=figure, budget_s=budget, at_least=facts.seconds_behind_undated),
    )


def rpo_records(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """records_behind (fresh) above the flow's records budget, when it has one."""
    if facts.budget_records is None or not facts.runnable:
        return QUIET
    if not _fresh(facts) or facts.records_behind is None:
        return _not_judged(facts, "records behind")
    figure, budget = facts.records_behind, facts.budget_records
    return Verdict(
        records_over(records_behind=figure, budget_records=budget),
        figure,
        budget,
        "records",
        facts.observed_at,
        records_over_text(records_behind=figure, budget_records=budget),
    )


def stale_status(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """A flow that should replicate has no fresh report (STALE), or none ever although it has had tasks
    for three stale limits."""
    if not facts.runnable or now - facts.runnable_since <= limits.stale_after_s:
        return QUIET
    # A new flow's first report waits for its topic sync (remote topics created) too: longer grace.
    never = (
        facts.status == UNKNOWN
        and (facts.tasks_planned or 0) > 0
        and now - facts.runnable_since > NEVER_REPORTED_GRACE * limits.stale_after_s
    )
    if facts.status != STALE and not never:
        return QUIET
    age = None if facts.observed_at is None else max(now - facts.observed_at, 0.0)
    said = "no status report ever" if age is None else f"newest status report is {age:.0f} s old"
    why = (
        f"no worker replicates the flow, or its slices take longer than the {limits.stale_after_s:g} s limit "
        "(an overloaded worker: docs/scale.md)"
    )
    return Verdict(True, age, limits.stale_after_s, "seconds", now, f"{said}: {why}")


def heartbeat_max_age_s(facts: FlowFacts, limits: Limits) -> float:
    return max(3 * facts.heartbeat_interval_s, limits.heartbeat_min_age_s)


def heartbeat_missing(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """emit.heartbeats.enabled, and no heartbeat emitted within max(3 intervals, the minimum)."""
    if not facts.runnable or not facts.heartbeats_enabled:
        return QUIET
    threshold = heartbeat_max_age_s(facts, limits)
    age = now - (facts.heartbeat_at if facts.heartbeat_at is not None else facts.runnable_since)
    if age <= threshold:
        return QUIET
    said = "no heartbeat emitted" if facts.heartbeat_at is None else "last heartbeat emitted"
    return Verdict(True, age, threshold, "seconds", now, f"{said} {age:.0f} s ago (limit {threshold:g} s)")


def data_loss_gap(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """Source offsets were deleted before replication within the window (retention outran the flow)."""
    if facts.gaps_recent == 0:
        return QUIET
    return Verdict(
        True,
        facts.lost_records_recent,
        0,
        "records",
        facts.last_gap_at,
        f"{facts.gaps_recent} data-loss gap(s), {facts.lost_records_recent} records lost in the last "
        f"{limits.data_loss_window_s:g} s",
    )


def flow_faulted(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    if facts.state != "faulted":
        return QUIET
    age = max(now - facts.runnable_since, 0.0)
    return Verdict(True, age, None, "seconds", now, facts.state_reason or "the flow is faulted")


def no_lease_holder(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """The flow has planned tasks and no replication worker is alive, or some task has no lease holder."""
    if not facts.runnable or not facts.tasks_planned or facts.replication_workers is None:
        return QUIET
    if now - facts.runnable_since <= limits.stale_after_s:
        return QUIET
    if facts.replication_workers == 0:
        return Verdict(
            True,
            facts.tasks_planned,
            0,
            "tasks",
            facts.tasks_observed_at,
            f"no replication worker is running: {facts.tasks_planned} task(s) wait",
        )
    unheld = facts.tasks_planned - (facts.tasks_leased or 0)
    if unheld <= 0:
        return QUIET
    return Verdict(
        True,
        unheld,
        0,
        "tasks",
        facts.tasks_observed_at,
        f"{unheld} of {facts.tasks_planned} task(s) have no lease holder",
    )


def pool_without_workers(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """The flow should replicate and is pinned to a worker pool no live worker consumes: nothing runs it
    (whether or not its tasks are planned yet: the metadata workers plan them, the pool's run them)."""
    if not facts.runnable or not facts.pool or facts.pool_workers is None or facts.pool_workers > 0:
        return QUIET
    return Verdict(
        True,
        0,
        0,
        "workers",
        now,
        f"worker pool {facts.pool} has no live worker (none consumes replication.{facts.pool}): the flow is "
        "not replicating; start a worker of the pool or move the flow to another pool",
    )


def offset_syncs_stopped(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """Records were replicated well after the newest offset sync: a failover would translate inexactly."""
    if not facts.runnable or facts.records_replicated_at is None:
        return QUIET
    since = facts.offset_sync_at if facts.offset_sync_at is not None else facts.runnable_since
    lag = facts.records_replicated_at - since
    if lag <= limits.offset_sync_max_lag_s:
        return QUIET
    age = now - since
    return Verdict(
        True,
        age,
        limits.offset_sync_max_lag_s,
        "seconds",
        facts.records_replicated_at,
        f"records replicated {lag:.0f} s after the newest offset sync: a failover now would translate "
        "consumer offsets inexactly",
    )


def verification_mismatch(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """The verifier found a partition whose target copy differs from the source (whatever the state)."""
    if not facts.mismatches:
        return QUIET
    count = len(facts.mismatches)
    more = f" (and {count - 1} more partition(s))" if count > 1 else ""
    return Verdict(True, count, 0, "partitions", facts.mismatch_checked_at, facts.mismatches[0] + more)


def readiness_low(facts: FlowFacts, limits: Limits, now: float) -> Verdict:
    """A flow that should replicate (past its first verification grace) scores below the threshold."""
    if not facts.runnable or facts.readiness_score is None:
        return QUIET
    if now - facts.runnable_since <= limits.readiness_grace_s:
        return QUIET
    score = facts.readiness_score
    why = "; ".join(facts.readiness_problems[:3]) or "no reason given"
    return Verdict(
        score < limits.readiness_below,
        score,
        limits.readiness_below,
        "score",
        now,
        f"failover readiness {score}/100, below {limits.readiness_below:g}: {why}",
    )


RULES: dict[str, Callable[[FlowFacts, Limits, float], Verdict]] = {
    RPO_SECONDS: rpo_seconds,
    RPO_RECORDS: rpo_records,
    STALE_STATUS: stale_status,
    HEARTBEAT_MISSING: heartbeat_missing,
    DATA_LOSS_GAP: data_loss_gap,
    FLOW_FAULTED: flow_faulted,
    NO_LEASE_HOLDER: no_lease_holder,
    POOL_WITHOUT_WORKERS: pool_without_workers,
    OFFSET_SYNCS_STOPPED: offset_syncs_stopped,
    VERIFICATION_MISMATCH: verification_mismatch,
    READINESS_LOW: readiness_low,
}


# The cause pages, not its consequences (as deploy/alertmanager's inhibitions): a faulted flow is stale,
# misses heartbeats and syncs because it is faulted; with no replication worker nobody reports.
INHIBITS: dict[str, frozenset[str]] = {
    FLOW_FAULTED: frozenset(
        {
            STALE_STATUS,
            HEARTBEAT_MISSING,
            NO_LEASE_HOLDER,
            OFFSET_SYNCS_STOPPED,
            READINESS_LOW,
        }
    ),
    NO_LEASE_HOLDER: frozenset({STALE_STATUS, READINESS_LOW}),
    POOL_WITHOUT_WORKERS: frozenset({NO_LEASE_HOLDER, STALE_STATUS, READINESS_LOW}),
    # A readiness score below the threshold because of a problem a rule of its own reports pages once,
    # as that problem (the score and its reasons still show on the pages, the API and /metrics).
    RPO_SECONDS: frozenset({READINESS_LOW}),
    RPO_RECORDS: frozenset({READINESS_LOW}),
    STALE_STATUS: frozenset({READINESS_LOW}),
    OFFSET_SYNCS_STOPPED: frozenset({READINESS_LOW}),
    VERIFICATION_MISMATCH: frozenset({READINESS_LOW}),
}


def evaluate(facts: FlowFacts, limits: Limits, *, now: float) -> dict[str, Verdict]:
    """Every rule's verdict on the flow at `now`; a rule another firing rule inhibits is quiet."""
    verdicts = {rule: decide(facts, limits, now) for rule, decide in RULES.items()}
    for cause, consequences in INHIBITS.items():
        if verdicts[cause].firing:
            verdicts.update(dict.fromkeys(consequences, QUIET))
    return verdicts
