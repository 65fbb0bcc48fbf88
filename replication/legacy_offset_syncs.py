"""Moving offset syncs from the name Mirrorplane used before to the name MM2 uses (pure).

With `offset-syncs.topic.location = target` MM2 names the topic after the SOURCE alias
(`mm2-offset-syncs.<source>.internal` on the target); Mirrorplane used to name it after the target, so
every flow into one target with that location wrote to the same `mm2-offset-syncs.<target>.internal`.
A flow now copies its syncs from that legacy topic to its own topic, once, before it writes there.

Which legacy syncs are a flow's: a sync names a source topic and partition, not the flow. A flow could
have written it when its topic filter accepts the topic and its remote partition exists on the target
(`A.orders` partition 2 for flow A->C); that decides alone between fan-in flows with
DefaultReplicationPolicy, whose remote topics differ by source prefix. A partition that two flows could
have written (the same topic name on both sources with IdentityReplicationPolicy, or a remote topic
created on the target by hand) is ambiguous: its syncs are mixed and cannot be told apart from their
bytes, so they are left behind (reported). Such a partition translates again from the first sync the flow
writes after the move (a sync at each partition's first record), never wrongly; consumer offsets older
than that sync get no checkpoint, as for a compacted offset-syncs topic.

Idempotent and safe to repeat at any time, per partition: the syncs already in the new topic must be a
prefix of the legacy ones (a copy interrupted half-way), and only the rest is copied; a partition whose
new topic holds anything else (the flow already wrote its own syncs there) is left as it is, because
`OffsetSyncStore` reads syncs in the order written and an older sync after a newer one reads as a rewind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from replication.config import FlowConfig, OffsetSyncsTopicLocation
from replication.filters import TopicFilter
from replication.formats import OffsetSync
from replication.policy import replication_policy_for

TopicPartition = tuple[str, int]
SyncClaim = Callable[[str, int], bool]  # could this flow have written a sync of (source topic, partition)


@dataclass(frozen=True)
class SyncsMigration:
    """What moving a flow's legacy syncs does: `copy` (in their written order) and what stays behind."""

    copy: list[OffsetSync] = field(default_factory=list)
    ambiguous: list[TopicPartition] = field(default_factory=list)  # claimed by more than one flow
    already_moved: list[TopicPartition] = field(default_factory=list)  # the new topic has its own syncs

    def summary(self) -> str:
        return (
            f"{len(self.copy)} syncs copied, {len(self.ambiguous)} partitions left behind "
            f"(ambiguous between flows), {len(self.already_moved)} already moved"
        )


def legacy_topic_writers(flows: Iterable[FlowConfig], *, target: str) -> list[FlowConfig]:
    """The flows that wrote to the legacy `mm2-offset-syncs.<target>.internal` on `target`."""
    return [
        flow
        for flow in flows
        if flow.target == target and flow.offset_syncs_topic_location == OffsetSyncsTopicLocation.TARGET
    ]


def sync_claims(
    flows: Sequence[FlowConfig], *, target_partitions: Mapping[str, int], known_aliases: Sequence[str]
) -> dict[str, SyncClaim]:
    """Per flow name: whether it could have written a sync of (topic, partition): its topic filter accepts
    the topic and the remote partition exists on the target."""

    def claim_of(flow: FlowConfig) -> SyncClaim:
        policy = replication_policy_for(flow, known_aliases=known_aliases)
        topic_filter = TopicFilter.for_flow(flow)

        def claims(topic: str, partition: int) -> bool:
            remote = policy.format_remote_topic(flow.source, topic)
            return topic_filter.should_replicate_topic(topic) and target_partitions.get(remote, 0) > partition

        return claims

    return {flow.name: claim_of(flow) for flow in flows}


def plan_syncs_migration(
    *,
    flow: str,
    legacy: Sequence[OffsetSync],
    current: Sequence[OffsetSync],
    claims: Mapping[str, SyncClaim],
) -> SyncsMigration:
    """The legacy syncs of `flow` still to copy to its topic, which holds `current` (both in written order)."""
    ours: dict[TopicPartition, list[OffsetSync]] = defaultdict(list)
    ambiguous: set[TopicPartition] = set()
    for sync in legacy:
        key = (sync.topic, sync.partition)
        claimants = [name for name, claim in claims.items() if claim(*key)]
        if claimants == [flow]:
            ours[key].append(sync)
        elif flow in claimants:
            ambiguous.add(key)
    moved: dict[TopicPartition, list[OffsetSync]] = defaultdict(list)
    for sync in current:
        moved[(sync.topic, sync.partition)].append(sync)
    remaining: dict[TopicPartition, list[OffsetSync]] = {}
    already: list[TopicPartition] = []
    for key, syncs in ours.items():
        done = moved.get(key, [])
        if syncs[: len(done)] == done:
            remaining[key] = syncs[len(done) :]
        else:
            already.append(key)
    # Order matters within a partition only (OffsetSyncStore keeps each partition apart).
    copy = [sync for syncs in remaining.values() for sync in syncs]
    return SyncsMigration(copy=copy, ambiguous=sorted(ambiguous), already_moved=sorted(already))
