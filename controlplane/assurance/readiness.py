"""Failover readiness: the score (`replication.readiness`), recomputed on every read from the live
status, the RPO budget, the runtime signals, the verifier's rows and observations, the reverse flow and
the ACL sync warnings. The overview, the failover page, the API, /metrics and the `readiness_low` alert
rule all read it here, so they agree.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from controlplane.assurance.budgets import DEFAULT_BUDGET, RpoBudget, rpo_budgets
from controlplane.assurance.models import FlowAssurance
from controlplane.assurance.verification import VerificationSummary, verification_statuses
from controlplane.core.statements import statement
from controlplane.flows import engine, lifecycle
from controlplane.flows.models import Cluster, Flow, FlowState
from controlplane.flows.selectors import of_flows
from controlplane.status import rollup
from controlplane.status.models import FlowSignals
from replication.readiness import Readiness, ReadinessFacts, ReadinessLimits, readiness_score

UNKNOWN, STALE = rollup.UNKNOWN, rollup.STALE


# -- failover readiness -----------------------------------------------------------------------------------
def readiness_limits() -> ReadinessLimits:
    return ReadinessLimits(
        offset_sync_max_lag_s=settings.ALERTS_OFFSET_SYNC_MAX_LAG_S,
        verification_max_age_s=settings.READINESS_VERIFICATION_MAX_AGE_S,
    )


def _epoch(value: datetime.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


# A reverse flow's topic decisions, by (flow id, updated_at): rebuilt when the flow is edited.
_DECIDERS: dict[tuple, tuple] = {}


@statement
def _flows_between(sources: list[int], targets: list[int]):
    return Flow.objects.filter(source_id__in=sources, target_id__in=targets)


@statement
def _signals(flow_ids: list[int] | None):
    return of_flows(FlowSignals.objects.all(), flow_ids)


@statement
def _assurances(flow_ids: list[int] | None):
    return of_flows(FlowAssurance.objects.all(), flow_ids)


class _ReverseFlows:
    """Each flow's reverse flow (target -> source), found among the flows read (one query for the others,
    unless `every_flow` says the flows read are all there are: their clusters are those of the flows read,
    read with them), and the flow's source `topics` (by flow id: its tasks' roll-ups' unless given)."""

    def __init__(
        self, flows: list[Flow], *, topics: dict[int, Sequence[str]], every_flow: bool = False
    ) -> None:
        self._by_clusters = {(f.source_id, f.target_id): f for f in flows}
        wanted = {(f.target_id, f.source_id) for f in flows} - self._by_clusters.keys()
        if wanted and not every_flow:
            clusters = {cluster.pk: cluster for f in flows for cluster in (f.source, f.target)}
            candidates = _flows_between(
                sources=sorted({source for source, _ in wanted}),
                targets=sorted({target for _, target in wanted}),
            )
            for flow in candidates:
                flow.source, flow.target = clusters[flow.source_id], clusters[flow.target_id]
                self._by_clusters.setdefault((flow.source_id, flow.target_id), flow)
        self._topics = topics
        self._aliases: list[str] | None = None

    def _decider(self, reverse: Flow) -> tuple:
        key = (reverse.pk, reverse.updated_at)
        if key not in _DECIDERS:
            if self._aliases is None:
                self._aliases = list(Cluster.objects.values_list("alias", flat=True))
            if len(_DECIDERS) > 10_000:
                _DECIDERS.clear()
            _DECIDERS[key] = (engine.topic_selection(reverse, known_aliases=self._aliases), {})
        return _DECIDERS[key]

    def of(self, summary: rollup.FlowSummary) -> tuple[str | None, list[str]]:
        """The reverse flow's name and the flow's source topics it does not replicate back yet."""
        flow = summary.flow
        reverse = self._by_clusters.get((flow.target_id, flow.source_id))
        if reverse is None:
            return None, []
        topics, decided = self._decider(reverse)
        missing = []
        for topic in self._topics.get(flow.pk, ()):
            if topic not in decided:
                decided[topic] = topics.decide(topic).replicate
            if not decided[topic]:
                missing.append(topic)
        return reverse.name, missing


@dataclass(frozen=True)
class FlowReadiness:
    flow: Flow
    readiness: Readiness
    computed_at: datetime.datetime
    threshold: float

    @property
    def score(self) -> int:
        return self.readiness.score

    @property
    def applies(self) -> bool:
        """Whether the score judges anything: a failover may start now (not while one runs, not after
        it, nor once migrated or disabled)."""
        return lifecycle.can_fail_over(self.flow.state)

    @property
    def not_applicable(self) -> str:
        """Why the score judges nothing ("" when it does): shown instead of it."""
        flow, state = self.flow, self.flow.state
        if self.applies:
            return ""
        if state == FlowState.FAILED_OVER:
            return (
                f"{flow.name} has failed over: {flow.target.alias} serves the moved groups and replication "
                f"is stopped, as the failover left it. There is nothing to fail over; a failback brings the "
                f"groups home to {flow.source.alias}."
            )
        if state == FlowState.MIGRATED:
            return f"{flow.name} is cut over for good: the clients use {flow.target.alias}; nothing to fail over."
        if state == FlowState.DISABLED:
            return f"{flow.name} is disabled: nothing replicates, so there is nothing to fail over."
        return f"{flow.name} is {state.replace('_', ' ')}: readiness is judged again once that ends."

    @property
    def below_threshold(self) -> bool:
        return self.applies and self.readiness.score < self.threshold


def readiness_facts(
    summary: rollup.FlowSummary,
    *,
    budget: RpoBudget,
    signals: FlowSignals | None,
    verification: VerificationSummary | None,
    assurance: FlowAssurance | None,
    reverse: tuple[str | None, list[str]],
) -> ReadinessFacts:
    flow = summary.flow
    partitions = summary.partition_count
    # The verifier keeps a row per partition the flow replicates (it deletes the others every run): its
    # roll-up's counts are the flow's, read without loading the rows.
    return ReadinessFacts(
        partitions=partitions,
        partitions_with_sync=min(verification.synced_count, partitions) if verification is not None else None,
        offset_sync_at=_epoch(signals and signals.offset_sync_emitted_at),
        records_replicated_at=_epoch(signals and signals.records_replicated_at),
        partitions_verified=min(verification.verified_count, partitions) if verification else 0,
        mismatches=tuple(p.reason for p in verification.mismatches) if verification else (),
        verified_at=_epoch(verification.verified_at) if verification else None,
        status_fresh=summary.status not in (STALE, UNKNOWN),
        # Silent: even the newest report is stale (one silent partition beside fresh ones is not "no
        # worker reports": the newest age would read 0 s).
        silent_for_s=(
            summary.age_s
            if summary.health == "stale"
            and summary.age_s is not None
            and summary.age_s > rollup.stale_after_s()
            else None
        ),
        seconds_behind=summary.seconds_behind,
        records_behind=summary.records_behind,
        budget_seconds=budget.seconds_behind,
        budget_records=budget.records_behind,
        groups_active_on_target=tuple(assurance.groups_active_on_target) if assurance else None,
        checkpoints_enabled=flow.emit_checkpoints_enabled,
        checkpoint_interval_s=float(flow.emit_checkpoints_interval_seconds),
        checkpoint_at=_epoch(signals and signals.checkpoint_emitted_at),
        reverse_flow=reverse[0],
        topics_not_brought_home=tuple(reverse[1]),
        partition_problems=tuple(assurance.partition_problems) if assurance else None,
        config_problems=tuple(assurance.config_problems) if assurance else None,
        observed_at=_epoch(assurance.observed_at) if assurance else None,
        acl_sync_enabled=flow.sync_topic_acls_enabled,
        # As the latest ACL sync pass found (the metadata worker), not every warning ever recorded.
        acl_unsupported=signals.acl_sync_unsupported if signals else None,
    )


@dataclass(frozen=True)
class ReadinessReads:
    """What the readiness score reads of every flow at once (keyed by flow id): RPO budgets, runtime
    signals (with whether ACL sync can run), the verifier's summaries and the stored assurance observations. The
    alert evaluation judges the same reads (`alerts_evaluate`), so both see one moment."""

    budgets: dict[int, RpoBudget]
    signals: dict[int, FlowSignals]
    verifications: dict[int, VerificationSummary]
    assurances: dict[int, FlowAssurance]


def readiness_reads(
    *,
    flow_ids: Collection[int] | None = None,
    budgets: dict[int, RpoBudget] | None = None,
    verifications: dict[int, VerificationSummary] | None = None,
) -> ReadinessReads:
    """The reads of the flows `flow_ids` (every flow's when None): one flow's page reads that flow's; their
    RPO budgets and verification summaries are `budgets` and `verifications` when read already (as
    `verification_statuses` answers: no key for a flow without a row)."""
    wanted = None if flow_ids is None else list(flow_ids)
    return ReadinessReads(
        budgets=rpo_budgets(flow_ids=flow_ids) if budgets is None else budgets,
        signals={row.flow_id: row for row in _signals(flow_ids=wanted)},
        verifications=verification_statuses(flow_ids=flow_ids) if verifications is None else verifications,
        assurances={row.flow_id: row for row in _assurances(flow_ids=wanted)},
    )


def readiness_reads_of(summaries: Sequence[rollup.FlowSummary]) -> ReadinessReads:
    """Every flow's reads (`readiness_reads`), their RPO budgets those the `summaries` carry (read with the
    roll-ups, not again): the overview, /metrics and the alert evaluation."""
    return readiness_reads(budgets={summary.flow.pk: summary.budget for summary in summaries})


def flow_readiness_all(
    summaries: list[rollup.FlowSummary] | None = None,
    *,
    now: datetime.datetime | None = None,
    reads: ReadinessReads | None = None,
    topics: dict[int, Sequence[str]] | None = None,
    every_flow: bool = False,
) -> dict[int, FlowReadiness]:
    """Every flow's readiness (a few queries for all flows, none when `reads` are given), keyed by flow id;
    `topics`: the flows' source topics by flow id, when read already (else their tasks' roll-ups'); `every_flow`: `summaries` are every
    flow's (`rollup.flow_summaries()`), so no other flow is read to find a reverse flow."""
    now = now or timezone.now()
    every_flow = every_flow or summaries is None
    summaries = rollup.flow_summaries(now=now) if summaries is None else summaries
    reads = readiness_reads_of(summaries) if reads is None else reads
    topics = {summary.flow.pk: summary.topics for summary in summaries} | (topics or {})
    reverse_flows = _ReverseFlows(
        [summary.flow for summary in summaries], topics=topics, every_flow=every_flow
    )
    limits, threshold = readiness_limits(), settings.READINESS_ALERT_BELOW
    result: dict[int, FlowReadiness] = {}
    for summary in summaries:
        flow_id = summary.flow.pk
        facts = readiness_facts(
            summary,
            budget=reads.budgets.get(flow_id, DEFAULT_BUDGET),
            signals=reads.signals.get(flow_id),
            verification=reads.verifications.get(flow_id),
            assurance=reads.assurances.get(flow_id),
            reverse=reverse_flows.of(summary),
        )
        readiness = readiness_score(facts, limits, now=now.timestamp())
        result[flow_id] = FlowReadiness(summary.flow, readiness, now, threshold)
    return result


def flow_readiness(
    summary: rollup.FlowSummary,
    *,
    now: datetime.datetime | None = None,
    verifications: dict[int, VerificationSummary] | None = None,
    topics: list[str] | None = None,
) -> FlowReadiness:
    """One flow's readiness, from its live summary (e.g. `rollup.flow_status`): its own reads only, its RPO
    budget the summary's, its verification `verifications` and its source `topics` when read already
    (`verification_statuses`, its RPO's topics)."""
    flow_id = summary.flow.pk
    reads = readiness_reads(
        flow_ids=[flow_id], budgets={flow_id: summary.budget}, verifications=verifications
    )
    given: dict[int, Sequence[str]] | None = None if topics is None else {flow_id: topics}
    return flow_readiness_all([summary], now=now, reads=reads, topics=given)[flow_id]
