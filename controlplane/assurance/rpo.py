"""Live RPO: per flow and topic, what a failover now would lose if the source vanished: records
(`records_behind`), value bytes (records behind x the partition's average replicated record size) and
seconds (`seconds_behind`), against the flow's RPO budget, with the age of the figures (STALE ones are
never judged against the budget).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.utils import timezone

from controlplane.assurance.budgets import RpoBudget
from controlplane.status import budgets, rollup


# -- live RPO ---------------------------------------------------------------------------------------------
def bytes_behind(*, records_behind: int | None, byte_count: int, record_count: int) -> int | None:
    """Value bytes behind, estimated with the partition's average replicated record size (None before it
    replicated any record or measured its lag)."""
    if records_behind == 0:
        return 0
    if records_behind is None or record_count <= 0:
        return None
    return round(records_behind * byte_count / record_count)


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


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _rpo(partitions, *, now: datetime.datetime) -> tuple:
    records = _sum([p.records_behind for p in partitions])
    size = _sum(
        [
            bytes_behind(
                records_behind=p.records_behind, byte_count=p.byte_count, record_count=p.record_count
            )
            for p in partitions
        ]
    )
    seconds = max((p.seconds_behind for p in partitions if p.seconds_behind is not None), default=None)
    oldest = min((p.observed_at for p in partitions), default=None)
    age = None if oldest is None else rollup.age_s(oldest, now=now)
    return records, size, seconds, oldest, age, any(p.stale for p in partitions)


def flow_rpo(
    summary: rollup.FlowSummary, *, budget: RpoBudget, now: datetime.datetime | None = None
) -> FlowRpo:
    """The flow's live RPO per topic and in total; the age is the oldest figure's (a topic is as old as
    its oldest partition report)."""
    now = now or timezone.now()
    by_topic: dict[str, list] = {}
    for partition in summary.partitions:
        by_topic.setdefault(partition.row.topic, []).append(partition)
    topics = tuple(TopicRpo(topic, *_rpo(parts, now=now)) for topic, parts in sorted(by_topic.items()))
    return FlowRpo(topics, *_rpo(summary.partitions, now=now), budget=budget)
