"""The drain: wait until every record on the source when the operation planned is on the target (with its
offset sync), the step shared by failover, failback, drills and cutover.

It polls the flow's replicated positions every DRAIN_POLL_S up to the operation's drain timeout, records
the partitions still behind on the operation row, and stops early when the worker stops (`requests.HandedOver`:
another worker resumes the drain at the same phase).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.utils import timezone

from controlplane.core.errors import ServiceConflict
from controlplane.operations import requests
from controlplane.operations.models import Operation, OperationPhase
from replication import failover, failover_reads
from replication.cluster_ports import FlowClusters
from replication.topic_partition import partition_label

DRAIN_POLL_S = 0.5


class DrainTimeout(ServiceConflict):
    """Records there when the operation started were still not copied when the timeout came."""


# -- the drain (both kinds) -------------------------------------------------------------------------------
def drain_rows(partitions: Mapping[tuple[str, int], str], ends: Mapping[tuple[str, int], int | None]) -> list:
    return [
        {"topic": topic, "partition": p, "remote_topic": remote, "end": ends.get((topic, p))}
        for (topic, p), remote in sorted(partitions.items())
    ]


def drain(
    operation: Operation,
    step: Callable[..., None],
    reader: FlowClusters,
    *,
    producers_stopped: bool,
) -> None:
    """Wait until every record below the recorded end offsets is copied, with its offset sync; progress
    on the operation at every look. Raises DrainTimeout after `drain_timeout_s` unless forced."""
    rows = operation.drain_partitions
    partitions = {(row["topic"], row["partition"]): row["remote_topic"] for row in rows}
    ends = {(row["topic"], row["partition"]): row["end"] for row in rows if row["end"] is not None}
    if operation.drain_started_at is None:
        step(drain_started_at=timezone.now())
    while True:
        if partitions:
            progress = failover_reads.observe_drain(
                reader, partitions=partitions, ends_at_start=ends, producers_stopped=producers_stopped
            )
        else:
            progress = failover.DrainProgress(True, 0, ())
        now = timezone.now()
        elapsed = (now - operation.drain_started_at).total_seconds()
        at_start = max(operation.drain_records_at_start or 0, progress.records_remaining)
        fields: dict[str, Any] = {
            "drain_records_at_start": at_start,
            "drain_records_remaining": progress.records_remaining,
            "drain_partitions_remaining": [
                partition_label(*key) for key in progress.partitions_remaining[:20]
            ],
            "drain_partition_count_remaining": len(progress.partitions_remaining),
            "drain_observed_at": now,
            "drain_done": progress.done,
            "progress": 1.0 if progress.done else round(1 - progress.records_remaining / at_start, 4),
        }
        remaining = (
            f"{progress.records_remaining} record(s) on {len(progress.partitions_remaining)} partition(s) "
            f"still to copy to {reader.target.alias}"
        )
        if progress.done:
            step(**fields, phase=OperationPhase.MOVING_GROUPS, message=f"drained in {elapsed:.0f} s")
            return
        if elapsed >= operation.drain_timeout_s:
            if not operation.force:
                step(**fields, message=f"drain timed out after {elapsed:.0f} s: {remaining}")
                raise DrainTimeout(
                    f"{remaining} after {operation.drain_timeout_s:g} s (the drain timeout). "
                    "Start the replication workers (or check the flow's errors) and run it again, "
                    "or force it to go on without them"
                )
            step(
                **fields,
                phase=OperationPhase.MOVING_GROUPS,
                message=f"forced on after {elapsed:.0f} s: {remaining}",
            )
            return
        step(**fields, message=f"draining for {elapsed:.0f} s: {remaining}")
        if requests.STOPPING.wait(DRAIN_POLL_S):
            raise requests.HandedOver()
