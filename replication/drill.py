"""Failover drills: the decisions, pure (`replication.kafka.drill_io` reads the records).

A drill rehearses a failover without touching production: for each chosen group it puts a *shadow*
group on the target at the offsets the failover would write (the same translation), reads the shadow's
next record on every partition, and compares it with the record the real group would read next on the
source, by content (`replication.verification.record_digest`: key, value, headers without ours; and the
timestamp when both sides carry the source's). The real group, the flow and the source are only read.

A partition passes when both next records are the same record, or when neither side has one (the group
is caught up). It fails, with the reason, when no offset sync covers the group's offset (a failover
could not place it: the offset syncs were deleted or compacted away), when the copy of the source's next
record is not on the target (the flow lags beyond the drill's wait), or when the contents differ.

A drill does not stop the flow, so the sync of the mirror's newest records may not be written yet (the
mirror writes it every `PROGRESS_SYNC_INTERVAL_S`, and when it stops, as before a failover): past the
newest sync a translation re-reads from the copy of the first record after it (`OffsetSyncStore`). The
drill waits for the syncs to reach the groups' offsets (`offsets_past_syncs`); a partition they still do
not reach fails with that reason, not as a duplicate or a skip a failover would make.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from replication.checkpoint import CommittedOffset
from replication.offset_sync_store import OffsetSyncStore
from replication.offset_syncs import PROGRESS_SYNC_INTERVAL_S
from replication.verification import MirroredRecord, as_copied, record_digest, same_record

SHADOW_PREFIX = "mirrorplane-drill-"
MAX_GROUP_NAME = 249


@dataclass(frozen=True)
class PartitionVerdict:
    passed: bool
    reason: str


def shadow_group_name(*, operation_id: int, attempt: int, group: str) -> str:
    """The shadow of `group` for attempt `attempt` of drill `operation_id`: recognisable, bounded in
    length, new for each attempt (a resumed drill never reuses the group a killed worker was using)."""
    name = f"{SHADOW_PREFIX}{operation_id}.{attempt}-{group}"
    if len(name) <= MAX_GROUP_NAME:
        return name
    tail = hashlib.sha256(group.encode()).hexdigest()[:16]
    return f"{name[: MAX_GROUP_NAME - 17]}-{tail}"


def record_evidence(record: MirroredRecord | None) -> dict | None:
    """What the history keeps of a compared record: where it is, when it was written, its digest."""
    if record is None:
        return None
    return {
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "digest": record_digest(record).hex(),
    }


def past_syncs_from(store: OffsetSyncStore, topic: str, partition: int, offset: int | None) -> int | None:
    """When a group at source `offset` lies past what the offset syncs place exactly, the source offset
    up to which they do (one past the newest sync's record); None when they place it, or when no sync
    will (there is none)."""
    newest = store.newest_sync(topic, partition)
    if newest is None or offset is None or offset <= newest.upstream_offset + 1:
        return None
    return newest.upstream_offset + 1


def offsets_past_syncs(
    store: OffsetSyncStore,
    committed: Mapping[str, Mapping[tuple[str, int], CommittedOffset]],
    remote_topics: Mapping[str, str],
) -> list[tuple[str, int]]:
    """The replicated source partitions where a group's committed offset (`committed`: per group) lies
    past what the offset syncs place exactly, for now (`past_syncs_from`)."""
    return sorted(
        {
            key
            for offsets in committed.values()
            for key, position in offsets.items()
            if key[0] in remote_topics and past_syncs_from(store, *key, position.offset) is not None
        }
    )


def judge_partition(
    *,
    translated: int | None,
    note: str,
    source: MirroredRecord | None,
    target: MirroredRecord | None,
    wait_s: float,
    schema_ids: Mapping[int, int] | None = None,
    past_syncs_from: int | None = None,
) -> PartitionVerdict:
    """Pass or fail one partition of one group, with the reason an operator acts on (`schema_ids`: a
    `rewrite-ids` flow's source -> target schema IDs, `as_copied`; `past_syncs_from`: the source offset
    up to which the offset syncs place the group, when its offset lies past it)."""
    if translated is None:
        why = note or "no offset sync covers the group's offset"
        return PartitionVerdict(False, f"a failover could not place the group here: {why}")
    if source is None and target is None:
        return PartitionVerdict(True, "caught up: no next record on either side")
    if past_syncs_from is not None and target is not None and not _same(source, target, schema_ids):
        return PartitionVerdict(
            False,
            f"after {wait_s:g} s the offset syncs place the group exactly only up to source offset "
            f"{past_syncs_from}: past it the shadow group re-reads from target offset {target.offset}. The "
            f"flow runs on during a drill and writes the sync of its newest records every "
            f"{PROGRESS_SYNC_INTERVAL_S:g} s, and when it stops (a failover stops it first): run the drill "
            "again with a longer record wait",
        )
    if source is None:
        assert target is not None
        return PartitionVerdict(
            False,
            f"the shadow group reads target offset {target.offset}, but the group has no next record on the "
            "source: after a failover it would read a record it never had (a duplicate or a foreign write)",
        )
    if target is None:
        return PartitionVerdict(
            False,
            f"the copy of source offset {source.offset} did not reach the target within {wait_s:g} s: the "
            "flow lags (a failover drains first); run the drill again when it has caught up",
        )
    if not _same(source, target, schema_ids):
        return PartitionVerdict(
            False,
            f"content differs: the group's next record is source offset {source.offset}, the shadow group "
            f"reads target offset {target.offset}, another record: a failover would skip or re-read",
        )
    return PartitionVerdict(
        True, f"source offset {source.offset} = target offset {target.offset}, by content"
    )


def _same(
    source: MirroredRecord | None, target: MirroredRecord, schema_ids: Mapping[int, int] | None
) -> bool:
    return source is not None and same_record(as_copied(source, schema_ids), target)


def estimate_rto(*, plan_s: float, drain_s: float, move_groups_s: float) -> dict:
    """How long the failover's steps take now, as the drill measured them: planning, the drain (the
    drill drains as a failover does, without pausing anything) and moving the groups (translating and
    writing the shadow groups' offsets)."""
    return {
        "plan_s": round(plan_s, 3),
        "drain_s": round(drain_s, 3),
        "move_groups_s": round(move_groups_s, 3),
        "total_s": round(plan_s + drain_s + move_groups_s, 3),
    }
