"""Whether replication runs at all (every page's workers banner, the overview, `GET /api/v1/status/`): the
newest slice report of any flow and the replication workers alive, while some flow should replicate; and
the overview's live status (that and every flow's roll-up)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db.models import Max
from django.db.models.functions import Coalesce
from django.utils import timezone

from controlplane.core import microcache, presence
from controlplane.core.statements import first_row, statement
from controlplane.flows import lifecycle
from controlplane.flows.models import Flow
from controlplane.status.models import FlowTaskStatus
from controlplane.status.rollup import FlowSummary, age_s, flow_summaries, stale_after_s


@dataclass(frozen=True)
class ReplicationActivity:
    """Whether replication runs: the newest slice report of any flow, and the replication workers that
    announce themselves in Redis (`controlplane.core.presence`), while some flow should replicate."""

    runnable: bool  # some flow is in a state the workers replicate
    expected: bool  # ... and has been for longer than the stale limit: its reports are due
    last_report_at: datetime.datetime | None
    age_s: float | None
    stale_after_s: float
    replication_workers: int | None  # alive on the replication queue; None when Redis does not answer

    @property
    def silent(self) -> bool:
        """No slice of any flow has reported within the stale limit although flows should replicate."""
        return self.expected and (self.age_s is None or self.age_s > self.stale_after_s)

    @property
    def no_workers(self) -> bool:
        """Flows should replicate and no replication worker is alive."""
        return self.runnable and self.replication_workers == 0

    @property
    def alarming(self) -> bool:
        return self.silent or self.no_workers


@statement
def _first_runnable():
    """When the longest-runnable flow became runnable (none: no flow is)."""
    return first_row(
        Flow.objects.filter(state__in=lifecycle.RUNNABLE_STATES)
        .annotate(runnable_since=Coalesce("state_changed_at", "created_at"))
        .order_by("runnable_since")
        .values_list("runnable_since", flat=True)
    )


def replication_activity(*, now: datetime.datetime | None = None) -> ReplicationActivity:
    now = now or timezone.now()
    stale_after = stale_after_s()
    # The longest-runnable flow's start: whether any flow is runnable, and whether one has been for longer
    # than the stale limit, in one statement.
    runnable = _first_runnable()
    first_runnable = runnable[0] if runnable else None
    newest = FlowTaskStatus.objects.aggregate(newest=Max("observed_at"))["newest"]
    try:
        workers = sum(settings.REPLICATION_QUEUE in w.queues for w in presence.workers_seen())
    except redis.RedisError:
        workers = None
    return ReplicationActivity(
        runnable=first_runnable is not None,
        expected=first_runnable is not None
        and first_runnable <= now - datetime.timedelta(seconds=stale_after),
        last_report_at=newest,
        age_s=None if newest is None else age_s(newest, now=now),
        stale_after_s=stale_after,
        replication_workers=workers,
    )


def replication_activity_shared() -> ReplicationActivity:
    """`replication_activity()` as every page built within a moment shows it: built once for all of them
    (`core.microcache`; it depends on no viewer, no flow and no query). Each random flow's live part, and
    the flows list, built their own: two statements and a Redis read per page."""
    shared, _ = microcache.shared("replication-activity", (), replication_activity)
    return shared


@dataclass(frozen=True)
class LiveStatus:
    """What the overview shows and `GET /api/v1/status/` answers."""

    stale_after_s: float
    replication: ReplicationActivity
    flows: list[FlowSummary]


def live_status(*, now: datetime.datetime | None = None) -> LiveStatus:
    now = now or timezone.now()
    return LiveStatus(
        stale_after_s=stale_after_s(),
        replication=replication_activity(now=now),
        flows=flow_summaries(now=now),
    )
