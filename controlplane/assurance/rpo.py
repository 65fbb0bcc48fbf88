"""Live RPO: per flow and topic, what a failover now would lose if the source vanished: records
(`records_behind`), value bytes (records behind x the partition's average replicated record size) and
seconds (`seconds_behind`), against the flow's RPO budget, with the age of the figures (STALE ones are
never judged against the budget).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils import timezone

from controlplane.assurance.budgets import RpoBudget
from controlplane.status import budgets, partitions, rollup, topic_rollups
from controlplane.status.models import FlowTaskStatus


# -- live RPO ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopicRpo:
    topic: str
    records_behind: int | None
    bytes_behind: int | None
    seconds_behind: float | None
    observed_at: datetime.datetime | None
    age_s: float | None
    stale: bool


@dataclass(frozen=True)
class FlowRpo:
    topics: tuple[TopicRpo, ...]
    records_behind: int | None
    bytes_behind: int | None
    seconds_behind: float | None
    observed_at: datetime.datetime | None
    age_s: float | None
    stale: bool
    budget: RpoBudget

    @property
    def over_budget(self) -> bool | None:
        """None while the figures are stale or unknown: never judged then."""
        if self.stale or self.seconds_behind is None:
            return None
        return budgets.over_budget(
            budget=self.budget, records_behind=self.records_behind, seconds_behind=self.seconds_behind
        )


def flow_rpo(
    summary: rollup.FlowSummary,
    *,
    budget: RpoBudget,
    now: datetime.datetime | None = None,
    topic_statuses: Sequence[partitions.TopicStatus] | None = None,
    tasks: Sequence[FlowTaskStatus] | None = None,
) -> FlowRpo:
    """The flow's live RPO per topic and in total; the age is the oldest figure's (a topic is as old as
    its oldest partition report). Read from the flow's task roll-ups (`status.topic_rollups.topic_statuses`), unless
    the caller read them already for many flows at once (`topic_statuses`: this flow's); its task roll-ups
    are read unless given (`tasks`: `rollup.FlowStatus.tasks`)."""
    now = now or timezone.now()
    if topic_statuses is None:
        topic_statuses = topic_rollups.topic_statuses(flow_ids=[summary.flow.pk], now=now, tasks=tasks).get(
            summary.flow.pk, []
        )
    topics = tuple(
        TopicRpo(t.topic, t.records_behind, t.bytes_behind, t.seconds_behind, t.observed_at, t.age_s, t.stale)
        for t in topic_statuses
    )
    oldest = min((t.observed_at for t in topics if t.observed_at is not None), default=None)
    return FlowRpo(
        topics,
        partitions.known((t.records_behind for t in topics), sum),
        partitions.known((t.bytes_behind for t in topics), sum),
        max((t.seconds_behind for t in topics if t.seconds_behind is not None), default=None),
        oldest,
        None if oldest is None else rollup.age_s(oldest, now=now),
        any(t.stale for t in topics),
        budget=budget,
    )
