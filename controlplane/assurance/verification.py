"""Continuous verification in the control plane: what the verifier recorded, and its reads.

The worker (`workers.verification`) reads the flow's rows once a run (`verification_rows`: where each
partition stands, and when it was last checked: its place in the rotation), lets `replication.kafka.verification_io` verify the
partitions whose turn it is, and stores the run's outcome for the flow with `verification_run_record`, in
one transaction: the partitions' rows (`PartitionVerification`: verified up to which source offset,
status, counts) in one upsert and, on a new mismatch, a `data_mismatch` flow event holding both records
(shown side by side on the event page). `verification_status` and `verification_statuses` are the reads
of it: roll-ups by aggregate queries (counts, sums, newest times) and the mismatching rows, the rows per
partition loaded only when asked; the flow page, the API, /metrics, the readiness score, the alert rule
and the cutover's "verify ranges" step use them.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

from django.db import transaction
from django.db.models import Case, Count, F, IntegerField, Max, Q, Sum, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from controlplane.assurance.models import (
    FlowAssurance,
    PartitionVerification,
    VerificationBacklog,
    VerificationStatus,
)
from controlplane.core.statements import statement
from controlplane.flows.models import Flow
from controlplane.flows.selectors import of_flows
from controlplane.status import partitions, rollup
from controlplane.status.models import FlowEvent, FlowEventKind, FlowPartitionStatus
from replication.verification import OffsetRange, PartitionOutcome, PartitionProgress
from replication.verification_backlog import BACKLOG_STALE_S, NOTHING_WAITS, Backlog, write_due

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class PartitionToVerify:
    topic: str
    partition: int
    remote_topic: str
    replicated_position: int | None  # the next source offset to replicate, as the workers last reported


def partitions_to_verify(*, flow_id: int) -> list[PartitionToVerify]:
    """The flow's replicated partitions (its status rows) with their replicated positions."""
    rows = FlowPartitionStatus.objects.filter(flow_id=flow_id).order_by("topic", "partition")
    # tuples, not model instances: every run reads every row (5,000 rows: 10 ms of CPU instead of 54)
    return [
        PartitionToVerify(*row)
        for row in rows.values_list("topic", "partition", "remote_topic", "replicated_offset")
    ]


# -- reads ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerificationSummary:
    """A flow's verification rolled up (aggregates and its mismatching rows: what the pages, the readiness
    score and the alert rule read) and, loaded when first asked, its rows per partition."""

    partition_count: int
    verified_count: int  # partitions with a verified range
    synced_count: int  # partitions with an offset sync read
    records_verified: int
    bytes_read: int
    checked_at: datetime.datetime | None  # the verifier's newest look at any partition
    verified_at: datetime.datetime | None  # the newest clean range
    mismatches: tuple[PartitionVerification, ...]
    _rows: Callable[[], tuple[PartitionVerification, ...]] = field(repr=False, compare=False)
    _backlog: Callable[[], BacklogSeen | None] = field(default=lambda: None, repr=False, compare=False)

    @cached_property
    def backlog(self) -> BacklogSeen | None:
        """What the flow's last verification run left waiting; None before a run stored one (read, for
        every flow of the summaries at once, when first asked)."""
        return self._backlog()

    @cached_property
    def partitions(self) -> tuple[PartitionVerification, ...]:
        """Every partition's row, in (topic, partition) order."""
        return self._rows()

    @property
    def status(self) -> str:
        """mismatch when any partition differs, ok when every partition has a verified range, else pending."""
        if self.mismatches:
            return VerificationStatus.MISMATCH
        if self.partition_count and self.verified_count == self.partition_count:
            return VerificationStatus.OK
        return VerificationStatus.PENDING

    def verified_up_to(self, topic: str, partition: int) -> int | None:
        """Every source record of the partition before this offset (from its verified_from) was verified."""
        row = next((p for p in self.partitions if (p.topic, p.partition) == (topic, partition)), None)
        return None if row is None or row.status == VerificationStatus.MISMATCH else row.verified_up_to


@dataclass(frozen=True)
class BacklogSeen:
    """A flow's verification backlog as its last run stored it (`VerificationBacklog`), aged when read;
    `{% observed %}` shows its time, stale once the verifier missed two refreshes."""

    backlog: Backlog
    observed_at: datetime.datetime
    now: datetime.datetime

    @property
    def partitions_waiting(self) -> int:
        return self.backlog.partitions

    @property
    def records_waiting(self) -> int:
        return self.backlog.records

    @property
    def oldest_look_at(self) -> datetime.datetime | None:
        return self.backlog.oldest_look_at

    @property
    def age_s(self) -> float:
        return rollup.age_s(self.observed_at, now=self.now)

    @property
    def stale(self) -> bool:
        return self.age_s > BACKLOG_STALE_S

    @property
    def wait_s(self) -> float | None:
        """How long the most neglected waiting partition has gone without a look, now."""
        return self.backlog.wait_s(now=self.now)

    @property
    def behind(self) -> bool:
        return self.backlog.behind(now=self.now)


def _stored_backlog(row: VerificationBacklog) -> Backlog:
    return Backlog(row.partitions_waiting, row.records_waiting, row.oldest_look_at)


def _backlogs(flow_ids: Collection[int]) -> dict[int, BacklogSeen]:
    now = timezone.now()
    rows = VerificationBacklog.objects.filter(flow_id__in=list(flow_ids)) if flow_ids else ()
    return {row.flow_id: BacklogSeen(_stored_backlog(row), row.observed_at, now) for row in rows}


_ROLLUP = {
    "partition_count": Count("pk"),
    "verified_count": Count("pk", filter=Q(verified_up_to__isnull=False, verified_from__isnull=False)),
    "synced_count": Count("pk", filter=Q(sync_upstream__isnull=False)),
    "records_verified": Coalesce(Sum("records_verified"), 0),
    "bytes_read": Coalesce(Sum("bytes_read"), 0),
    "checked_at": Max("checked_at"),
    "verified_at": Max("verified_at"),
}


@statement
def _mismatching(flow_ids: list[int] | None):
    return (
        of_flows(PartitionVerification.objects.all(), flow_ids)
        .filter(status=VerificationStatus.MISMATCH)
        .order_by("topic", "partition")
    )


@statement
def _rollups(flow_ids: list[int] | None):
    return (
        of_flows(PartitionVerification.objects.all(), flow_ids)
        .order_by()
        .values("flow_id")
        .annotate(**_ROLLUP)
    )


def _summaries(flow_ids: list[int] | None) -> dict[int, VerificationSummary]:
    """Each flow's summary of `rows`: two queries (the roll-ups, the mismatching rows); the rows
    themselves in one more, for every flow at once, when a summary's `partitions` is first read, and the
    backlogs likewise when one is first read (`backlog`: the flow page, its API, /metrics)."""
    mismatches: dict[int, list[PartitionVerification]] = {}
    rows = of_flows(PartitionVerification.objects.all(), flow_ids)
    for row in _mismatching(flow_ids=flow_ids):
        mismatches.setdefault(row.flow_id, []).append(row)
    loaded: dict[int, tuple[PartitionVerification, ...]] = {}

    def rows_of(flow_id: int) -> tuple[PartitionVerification, ...]:
        if not loaded:
            found: dict[int, list[PartitionVerification]] = {}
            for row in rows.order_by("flow_id", "topic", "partition"):
                found.setdefault(row.flow_id, []).append(row)
            loaded.update({flow: tuple(flow_rows) for flow, flow_rows in found.items()})
            loaded.setdefault(-1, ())  # loaded, even when no flow has a row
        return loaded.get(flow_id, ())

    rollups = {rollup.pop("flow_id"): rollup for rollup in _rollups(flow_ids=flow_ids)}
    backlogs: dict[int, BacklogSeen] | None = None

    def backlog_of(flow_id: int) -> BacklogSeen | None:
        nonlocal backlogs
        if backlogs is None:
            backlogs = _backlogs(rollups)
        return backlogs.get(flow_id)

    return {
        flow_id: VerificationSummary(
            **rollup,
            mismatches=tuple(mismatches.get(flow_id, ())),
            _rows=partial(rows_of, flow_id),
            _backlog=partial(backlog_of, flow_id),
        )
        for flow_id, rollup in rollups.items()
    }


NOT_VERIFIED = VerificationSummary(0, 0, 0, 0, 0, None, None, (), _rows=tuple)  # no partition's row yet


def verification_status(*, flow: Flow) -> VerificationSummary:
    """The flow's verification, rolled up, and per partition (topic, partition order) when read."""
    return verification_statuses(flow_ids=[flow.pk]).get(flow.pk, NOT_VERIFIED)


# Worst first: a mismatch, then a partition that cannot be verified, then one not verified yet.
_BADNESS = {VerificationStatus.MISMATCH: 3, VerificationStatus.UNVERIFIABLE: 2, VerificationStatus.PENDING: 1}


def verification_page(
    *, flow: Flow, page: int = 1, page_size: int = partitions.PAGE_SIZE, count: int | None = None
) -> partitions.PartitionPage:
    """Page `page` (past the last: the last) of the flow's verification rows, worst first (mismatches, then
    unverifiable, pending, ok; then topic, partition): a COUNT and one page of rows; `count`: the rows'
    number when known (its summary's `partition_count`), no COUNT then, and no read when none."""
    rows = PartitionVerification.objects.filter(flow=flow).alias(
        badness=Case(
            *(When(status=status, then=Value(bad)) for status, bad in _BADNESS.items()),
            default=Value(0),
            output_field=IntegerField(),
        )
    )
    return partitions.rows_page(
        rows.order_by(F("badness").desc(), "topic", "partition"), page=page, page_size=page_size, count=count
    )


def verification_statuses(*, flow_ids: Collection[int] | None = None) -> dict[int, VerificationSummary]:
    """The verification of the flows `flow_ids`, every flow's when None (two queries; every row in a third
    once some summary's `partitions` is read), for the overview, /metrics and the alert evaluation."""
    return _summaries(None if flow_ids is None else list(flow_ids))


def verification_rows(*, flow_id: int) -> dict[PartitionKey, PartitionVerification]:
    """The flow's rows, read once a run (no lock: one verifier runs at a time), for the planner
    (`progress_of`, `checked_at`: its place in the rotation) and for `verification_run_record`."""
    return {(row.topic, row.partition): row for row in PartitionVerification.objects.filter(flow_id=flow_id)}


def progress_of(row: PartitionVerification | None) -> PartitionProgress:
    """Where a partition's verification stands, as the planner reads it."""
    if row is None:
        return PartitionProgress()
    recheck = None
    if row.recheck_start is not None and row.recheck_end is not None:
        recheck = OffsetRange(row.recheck_start, row.recheck_end)
    return PartitionProgress(row.verified_from, row.verified_up_to, recheck, row.target_verified_up_to)


# -- writes (the worker) ----------------------------------------------------------------------------------
# Every column a run writes (all but the key): one upsert sets them.
_RUN_COLUMNS = [
    "remote_topic", "status", "reason", "verified_from", "verified_up_to", "target_verified_up_to",
    "mismatch_offset", "recheck_start", "recheck_end", "records_verified", "ranges_verified",
    "ranges_sampled", "bytes_read", "last_digest", "sync_upstream", "sync_downstream", "checked_at",
    "verified_at",
]  # fmt: skip


def verification_run_record(
    *,
    flow_id: int,
    stored: dict[PartitionKey, PartitionVerification],
    outcomes: Sequence[PartitionOutcome],
    partitions: set[PartitionKey],
    at: datetime.datetime,
    backlog: Backlog = NOTHING_WAITS,
) -> list[PartitionOutcome]:
    """Store a run's outcome for a flow (its rows as the run read them: `stored`, from
    `verification_rows`) in one transaction: the rows of the partitions it checked and of those whose
    state changed, in one upsert (a partition with nothing new is not written, nor locked); a
    `data_mismatch` event with both records for each new mismatch (not the one already recorded); the
    rows of partitions the flow no longer replicates (not in `partitions`) deleted; and the `backlog` the
    run leaves, when it changed or is due again (`verification_backlog.write_due`: the stored one is read
    for that). Returns the outcomes that were new mismatches. A run with nothing to store writes nothing."""
    stale = [row.pk for key, row in stored.items() if key not in partitions]
    backlog_row = _backlog_row(flow_id, backlog, at=at)
    rows, events, mismatches = [], [], []
    for outcome in outcomes:
        row = stored.get((outcome.topic, outcome.partition))
        if row is not None and not outcome.checked and _unchanged(row, outcome):
            continue
        row = row or PartitionVerification(flow_id=flow_id, topic=outcome.topic, partition=outcome.partition)
        if _apply(row, outcome, at=at):
            events.append(_mismatch_event(flow_id, outcome, at=at))
            mismatches.append(outcome)
        row.pk = None  # upserted on (flow, topic, partition)
        rows.append(row)
    if not (stale or rows or backlog_row):
        return mismatches
    with transaction.atomic():
        if backlog_row is not None:
            backlog_row.save(force_insert=backlog_row._state.adding)
        if stale:
            PartitionVerification.objects.filter(pk__in=stale).delete()
        if rows:
            PartitionVerification.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["flow", "topic", "partition"],
                update_fields=_RUN_COLUMNS,
            )
        if events:
            FlowEvent.objects.bulk_create(events)
    return mismatches


def _backlog_row(flow_id: int, backlog: Backlog, *, at: datetime.datetime) -> VerificationBacklog | None:
    """The flow's backlog row set to `backlog` when it is to be written (one read), else None."""
    row = VerificationBacklog.objects.filter(flow_id=flow_id).first()
    stored = None if row is None else _stored_backlog(row)
    if not write_due(stored, row.observed_at if row else None, backlog, now=at):
        return None
    row = row or VerificationBacklog(flow_id=flow_id)
    row.partitions_waiting, row.records_waiting = backlog.partitions, backlog.records
    row.oldest_look_at, row.observed_at = backlog.oldest_look_at, at
    return row


def _unchanged(row: PartitionVerification, outcome: PartitionOutcome) -> bool:
    """Whether an outcome of a partition the run did not read says what its row says already."""
    recheck = (outcome.recheck.start, outcome.recheck.end) if outcome.recheck else (None, None)
    sync = outcome.sync or (row.sync_upstream, row.sync_downstream)
    return (
        (row.status, row.reason, row.verified_from, row.verified_up_to, row.target_verified_up_to)
        == (outcome.status, outcome.reason, outcome.verified_from, outcome.verified_up_to,
            outcome.target_verified_up_to)
        and (row.recheck_start, row.recheck_end) == recheck
        and (row.sync_upstream, row.sync_downstream) == sync
        and row.remote_topic == outcome.remote_topic
    )  # fmt: skip


def _apply(row: PartitionVerification, outcome: PartitionOutcome, *, at: datetime.datetime) -> bool:
    """The outcome on the partition's row; True when it is a new mismatch (not the one recorded)."""
    mismatch = outcome.mismatch
    new_mismatch = mismatch is not None and (
        row.status != VerificationStatus.MISMATCH or row.mismatch_offset != mismatch.source_offset
    )
    row.remote_topic = outcome.remote_topic
    row.verified_from, row.verified_up_to = outcome.verified_from, outcome.verified_up_to
    row.target_verified_up_to = outcome.target_verified_up_to
    if outcome.status != VerificationStatus.MISMATCH or mismatch is not None:  # else: not re-checked
        row.status, row.reason = outcome.status, outcome.reason
        row.mismatch_offset = mismatch.source_offset if mismatch else None
    row.recheck_start = outcome.recheck.start if outcome.recheck else None
    row.recheck_end = outcome.recheck.end if outcome.recheck else None
    row.records_verified += outcome.records_verified
    row.ranges_verified += outcome.ranges_verified
    row.ranges_sampled += outcome.ranges_sampled
    row.bytes_read += outcome.bytes_read
    row.last_digest = outcome.last_digest or row.last_digest
    if outcome.sync is not None:
        row.sync_upstream, row.sync_downstream = outcome.sync
    row.checked_at = at
    if outcome.verified_clean:
        row.verified_at = at
    return new_mismatch


def _mismatch_event(flow_id: int, outcome: PartitionOutcome, *, at: datetime.datetime) -> FlowEvent:
    mismatch = outcome.mismatch
    assert mismatch is not None
    return FlowEvent(
        flow_id=flow_id,
        at=at,
        kind=FlowEventKind.DATA_MISMATCH,
        topic=outcome.topic,
        partition=outcome.partition,
        first_offset=mismatch.source_offset,
        last_offset=mismatch.source_offset,
        message=mismatch.message(
            topic=outcome.topic, partition=outcome.partition, remote_topic=outcome.remote_topic
        ),
        detail={
            "reason": mismatch.reason,
            "remote_topic": outcome.remote_topic,
            "range": [outcome.recheck.start, outcome.recheck.end] if outcome.recheck else None,
            "source_offset": mismatch.source_offset,
            "target_offset": mismatch.target_offset,
            "source": mismatch.source.as_evidence() if mismatch.source else None,
            "target": mismatch.target.as_evidence() if mismatch.target else None,
            # The source record above is as on the source; compared with these schema IDs rewritten.
            "compared_as_copied": [list(ids) for ids in mismatch.compared_as_copied],
        },
    )


def assurance_record(
    *,
    flow_id: int,
    groups_active_on_target: list[str],
    partition_problems: list[str],
    config_problems: list[str],
    at: datetime.datetime,
) -> None:
    FlowAssurance.objects.update_or_create(
        flow_id=flow_id,
        defaults={
            "groups_active_on_target": groups_active_on_target,
            "partition_problems": partition_problems,
            "config_problems": config_problems,
            "observed_at": at,
        },
    )
