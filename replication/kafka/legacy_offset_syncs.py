"""Copy a flow's offset syncs from the legacy topic name to MM2's name (see `replication.legacy_offset_syncs`).

Runs where a flow starts (a worker building a flow's task, `python -m replication run`), before the flow
writes a sync; it reads both topics whole and writes only what the pure plan says, so it is safe to run
again and again (each run after the first copies nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from replication.config import ClusterConfig, FlowConfig
from replication.formats import OffsetSync
from replication.kafka.admin import ADMIN_TIMEOUT_S, TopicAdmin
from replication.kafka.internal_topics import InternalTopicReader, InternalTopicWriter
from replication.legacy_offset_syncs import (
    SyncsMigration,
    legacy_topic_writers,
    plan_syncs_migration,
    sync_claims,
)
from replication.policy import replication_policy_for

log = logging.getLogger(__name__)


def _read_syncs(target: ClusterConfig, topic: str, *, timeout_s: float) -> list[OffsetSync]:
    reader = InternalTopicReader(target, topic, decode=OffsetSync.decode, batch=10_000, timeout_s=timeout_s)
    try:
        return reader.read_new()
    finally:
        reader.close()


def move_legacy_offset_syncs(
    flow: FlowConfig,
    *,
    flows: Sequence[FlowConfig],
    target: ClusterConfig,
    known_aliases: Sequence[str],
    timeout_s: float = ADMIN_TIMEOUT_S,
) -> SyncsMigration | None:
    """Copy `flow`'s syncs from the legacy topic on `target` (None when there is nothing to move from);
    `flows` are all the flows configured (the others that wrote to the legacy topic decide ambiguity)."""
    policy = replication_policy_for(flow, known_aliases=known_aliases)
    legacy_topic = policy.legacy_flow_offset_syncs_topic(flow)
    if legacy_topic is None:
        return None
    partitions = TopicAdmin(target, timeout_s=timeout_s).partition_counts()
    if legacy_topic not in partitions:
        return None
    topic = policy.flow_offset_syncs_topic(flow)
    current = _read_syncs(target, topic, timeout_s=timeout_s) if topic in partitions else []
    writers = legacy_topic_writers([flow, *(f for f in flows if f.name != flow.name)], target=flow.target)
    plan = plan_syncs_migration(
        flow=flow.name,
        legacy=_read_syncs(target, legacy_topic, timeout_s=timeout_s),
        current=current,
        claims=sync_claims(writers, target_partitions=partitions, known_aliases=known_aliases),
    )
    if plan.copy:
        writer = InternalTopicWriter(
            target, topic, replication_factor=flow.offset_syncs_topic_replication_factor, timeout_s=timeout_s
        )
        try:
            writer.write([(sync.key(), sync.value()) for sync in plan.copy])
        finally:
            writer.close()
    if plan.copy or plan.ambiguous:
        log.info(
            "flow %s: offset syncs moved from %s to %s: %s", flow.name, legacy_topic, topic, plan.summary()
        )
    for topic_partition in plan.ambiguous:
        log.warning(
            "flow %s: the syncs of %s[%d] in %s may be another flow's too: left behind; it translates again "
            "from its next sync",
            flow.name,
            *topic_partition,
            legacy_topic,
        )
    return plan
