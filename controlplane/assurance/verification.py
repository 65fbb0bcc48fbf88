"""Continuous verification in the control plane: what the verifier recorded, and its reads.

The worker (`workers.verification`) asks `partition_progress` where each partition stands, lets
`replication.kafka.verification_io` verify the next ranges, and stores each partition's outcome with
`verification_outcome_record`: the partition's row (`PartitionVerification`: verified up to which source
offset, status, counts) and, on a new mismatch, a `data_mismatch` flow event holding both records (shown
side by side on the event page). `verification_status` is the one read of it: the flow page, the API,
/metrics, the readiness score, the alert rule and the cutover's "verify ranges" step use it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db import transaction

from controlplane.models import (
    Flow,
    FlowAssurance,
    FlowEvent,
    FlowEventKind,
    FlowPartitionStatus,
    PartitionVerification,
    VerificationStatus,
)
from replication.verification import OffsetRange, PartitionOutcome, PartitionProgress

PartitionKey = tuple[str, int]
NOT_STARTED = PartitionProgress()


@dataclass(frozen=True)
class PartitionToVerify:
    topic: str
    partition: int
    remote_topic: str
    replicated_position: int | None  # the next source offset to replicate, as the workers last reported


def partitions_to_verify(*, flow_id: int) -> list[PartitionToVerify]:
    """The flow's replicated partitions (its status rows) with their replicated positions."""
    rows = FlowPartitionStatus.objects.filter(flow_id=flow_id).order_by("topic", "partition")
    return [
        PartitionToVerify(row.topic, row.partition, row.remote_topic, row.replicated_offset)
        for row in rows.only("topic", "partition", "remote_topic", "replicated_offset")
    ]


# -- reads ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerificationSummary:
    """A flow's verification: per partition rows, and the roll-up pages and rules use."""

    partitions: tuple[PartitionVerification, ...]
    checked_at: datetime.datetime | None  # the verifier's newest look at any partition
    verified_at: datetime.datetime | None  # the newest clean range

    @property
    def mismatches(self) -> tuple[PartitionVerification, ...]:
        return tuple(p for p in self.partitions if p.status == VerificationStatus.MISMATCH)

    @property
    def verified(self) -> tuple[PartitionVerification, ...]:
        return tuple(
            p for p in self.partitions if p.verified_up_to is not None and p.verified_from is not None
        )

    @property
    def records_verified(self) -> int:
        return sum(p.records_verified for p in self.partitions)

    @property
    def status(self) -> str:
        """mismatch when any partition differs, ok when every partition has a verified range, else pending."""
        if self.mismatches:
            return VerificationStatus.MISMATCH
        if self.partitions and len(self.verified) == len(self.partitions):
            return VerificationStatus.OK
        return VerificationStatus.PENDING

    def verified_up_to(self, topic: str, partition: int) -> int | None:
        """Every source record of the partition before this offset (from its verified_from) was verified."""
        row = next((p for p in self.partitions if (p.topic, p.partition) == (topic, partition)), None)
        return None if row is None or row.status == VerificationStatus.MISMATCH else row.verified_up_to


def _summary(rows: list[PartitionVerification]) -> VerificationSummary:
    checked = [r.checked_at for r in rows if r.checked_at is not None]
    verified = [r.verified_at for r in rows if r.verified_at is not None]
    return VerificationSummary(tuple(rows), max(checked, default=None), max(verified, default=None))


def verification_status(*, flow: Flow) -> VerificationSummary:
    """The flow's verification, per partition (topic, partition order) and rolled up."""
    return _summary(list(PartitionVerification.objects.filter(flow=flow).order_by("topic", "partition")))


def verification_statuses() -> dict[int, VerificationSummary]:
    """Every flow's verification (one query), for the overview, /metrics and the alert evaluation."""
    rows: dict[int, list[PartitionVerification]] = {}
    for row in PartitionVerification.objects.order_by("flow_id", "topic", "partition"):
        rows.setdefault(row.flow_id, []).append(row)
    return {flow_id: _summary(found) for flow_id, found in rows.items()}


def mismatch_events(*, flow: Flow) -> list[FlowEvent]:
    return list(flow.events.filter(kind=FlowEventKind.DATA_MISMATCH)[:20])


def partition_progress(*, flow_id: int) -> dict[PartitionKey, PartitionProgress]:
    """Where each partition's verification stands, as the planner reads it."""
    return {
        (row.topic, row.partition): PartitionProgress(
            verified_from=row.verified_from,
            verified_up_to=row.verified_up_to,
            target_verified_up_to=row.target_verified_up_to,
            recheck=(
                OffsetRange(row.recheck_start, row.recheck_end)
                if row.recheck_start is not None and row.recheck_end is not None
                else None
            ),
        )
        for row in PartitionVerification.objects.filter(flow_id=flow_id)
    }


# -- writes (the worker) ----------------------------------------------------------------------------------
def verification_outcome_record(*, flow_id: int, outcome: PartitionOutcome, at: datetime.datetime) -> None:
    """Store one partition's outcome of a run; a new mismatch (not the one already recorded) also becomes
    a `data_mismatch` event with both records."""
    with transaction.atomic():
        row, _ = PartitionVerification.objects.select_for_update().get_or_create(
            flow_id=flow_id, topic=outcome.topic, partition=outcome.partition
        )
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
        row.save()
        if new_mismatch:
            FlowEvent.objects.create(
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
                },
            )


def verification_prune(*, flow_id: int, partitions: set[PartitionKey]) -> None:
    """Forget partitions the flow no longer replicates."""
    stale = [
        row.pk
        for row in PartitionVerification.objects.filter(flow_id=flow_id)
        if (row.topic, row.partition) not in partitions
    ]
    PartitionVerification.objects.filter(pk__in=stale).delete()


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
