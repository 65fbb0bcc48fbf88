"""Failback of a flow after a failover, as a durable `Operation` (kind `failback`) run like a failover
(controlplane.operations.failover), phase by phase:
1. planning: `lifecycle.begin_failback`; the reverse flow (target->source) is created or updated to
   replicate every topic the failover moved consumers to (added to its topics, never narrowing them;
   the topics mirrored from the source excluded), enabled and resumed, syncing schemas as the flow does
   when it syncs none yet (docs/schemas.md); each of those topics' end offsets on the target now;
2. draining: the reverse flow copies every record written on the target up to then to the source;
   on timeout the flow stays FAILED_OVER (outcome `failed`), unless `force`;
3. moving_groups: each group's positions on the mirrored topics of the target translated back to the
   source and written there; `lifecycle.complete_failback` (PAUSED: resume it once the consumers run on
   the source again).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from controlplane.core.errors import ServiceConflict
from controlplane.flows import engine, lifecycle, services
from controlplane.flows.models import Flow
from controlplane.operations import drain, requests
from controlplane.operations.failover import GroupResult, store_group_result, write_offsets
from controlplane.operations.models import Operation, OperationPhase
from replication import failover
from replication.checkpoint import may_sync_group_offsets
from replication.cluster_ports import FlowClusters
from replication.config import DEFAULT_TOPICS_EXCLUDE, SchemaIdMode
from replication.filters import TopicFilter
from replication.policy import is_identity_policy_class
from replication.topic_partition import partition_label


# -- failback ---------------------------------------------------------------------------------------------
def topics_back(operation: Operation) -> list[str]:
    """The topics a failback replicates back: every topic the failover moved its groups' consumers to."""
    chosen = set(operation.groups)
    return sorted(
        {
            topic
            for result in requests.moved_groups(operation.failover)
            if result.group in chosen
            for topic in result.topics
        }
    )


def reverse_flow_of(flow: Flow) -> Flow | None:
    return (
        Flow.objects.filter(source=flow.target, target=flow.source).select_related("source", "target").first()
    )


def reverse_flow_settings(flow: Flow, existing: Flow | None, *, topics: list[str]) -> dict[str, Any]:
    """The reverse flow's settings for a failback: `topics` added to what it replicates (never
    narrowed), the topics mirrored from the source excluded (they are there already), enabled."""
    exclude = failover.remote_topics_exclude(
        source_alias=flow.source.alias, separator=flow.replication_policy_separator
    )
    current_exclude = list(existing.topics_exclude) if existing else list(DEFAULT_TOPICS_EXCLUDE)
    current_topics = list(existing.topics) if existing else []
    selected = TopicFilter(current_topics, current_exclude)
    added = [re.escape(topic) for topic in topics if not selected.should_replicate_topic(topic)]
    settings: dict[str, Any] = {
        "enabled": True,
        "topics": current_topics + [pattern for pattern in added if pattern not in current_topics],
        "topics_exclude": current_exclude if exclude in current_exclude else [*current_exclude, exclude],
        # Groups consuming the target's own topics follow the reverse flow's checkpoints to the source.
        "sync_group_offsets_enabled": True,
    }
    if existing is None:
        settings |= {
            "replication_policy_class": flow.replication_policy_class,
            "replication_policy_separator": flow.replication_policy_separator,
            "pool": flow.pool,  # the same family of topics, on the same workers
        }
    if flow.schemas_sync_mode != SchemaIdMode.NONE and (
        existing is None or existing.schemas_sync_mode == SchemaIdMode.NONE
    ):
        # Records written on the target name its registry's schemas: the reverse flow syncs those subjects
        # to the source's registry and rewrites (or checks) the IDs as the flow did (docs/schemas.md).
        settings |= {
            "schemas_sync_mode": flow.schemas_sync_mode,
            "schemas_sync_interval_seconds": flow.schemas_sync_interval_seconds,
        }
    if is_identity_policy_class(flow.replication_policy_class):
        # Identity names cannot tell a mirrored record from a new one: the provenance header does.
        settings["provenance_header_enabled"] = True
    return settings


def _set_up_reverse_flow(operation: Operation, *, topics: list[str]) -> tuple[Flow, bool]:
    flow = operation.flow
    actor = operation.requested_by
    existing = reverse_flow_of(flow)
    settings = reverse_flow_settings(flow, existing, topics=topics)
    if existing is None:
        reverse = services.flow_create(actor=actor, source=flow.target, target=flow.source, **settings)
    else:
        changes = {name: value for name, value in settings.items() if getattr(existing, name) != value}
        reverse = services.flow_update(actor=actor, flow=existing, **changes) if changes else existing
        if "resume" in lifecycle.allowed_actions(reverse.state):
            reverse = services.flow_resume(actor=actor, flow=reverse)
    selected = TopicFilter(reverse.topics, reverse.topics_exclude)
    excluded = [topic for topic in topics if not selected.should_replicate_topic(topic)]
    if excluded:
        raise ServiceConflict(
            f"{reverse.name} excludes {', '.join(excluded)} (topics.exclude {reverse.topics_exclude}): "
            "take them out of its topics.exclude so they can flow back, then fail back again"
        )
    return reverse, existing is None


def run(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    if operation.phase in (OperationPhase.QUEUED, OperationPhase.PLANNING):
        _plan_failback(operation, step)
    if operation.phase == OperationPhase.DRAINING:
        reader = engine.flow_reader(operation.reverse_flow)
        try:
            # Only what was written before the failback started is waited for: producers may still run.
            drain.drain(operation, step, reader, producers_stopped=False)
        finally:
            reader.close()
    _move_groups_to_source(operation, step)
    lifecycle.complete_failback(flow=flow)


def _plan_failback(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    step(phase=OperationPhase.PLANNING, message="setting up the reverse flow")
    lifecycle.begin_failback(flow=flow)
    topics = topics_back(operation)
    reverse, created = _set_up_reverse_flow(operation, topics=topics)
    step(
        reverse_flow=reverse,
        reverse_flow_created=operation.reverse_flow_created or created,
        topics_back=topics,
        message=f"reading the end offsets of {len(topics)} topic(s) on {flow.target.alias}",
    )
    reader = engine.flow_reader(reverse)
    try:
        partitions = {
            key: remote for key, remote in reader.replicated_partitions().items() if key[0] in topics
        }
        ends = reader.end_offsets(reader.source, partitions)
    finally:
        reader.close()
    step(
        drain_partitions=drain.drain_rows(partitions, ends), phase=OperationPhase.DRAINING, message="draining"
    )


def _move_groups_to_source(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    step(phase=OperationPhase.MOVING_GROUPS, message=f"writing the groups' offsets on {flow.source.alias}")
    reader = engine.flow_reader(flow)
    try:
        source_topics = {remote: topic for (topic, _), remote in reader.replicated_partitions().items()}
        for group in operation.groups:
            result = _fail_group_back(reader, group, source_topics=source_topics)
            store_group_result(
                operation, result, topics=sorted({key.rpartition("[")[0] for key in result.written})
            )
            step()
    finally:
        reader.close()


def _fail_group_back(reader: FlowClusters, group: str, *, source_topics: dict[str, str]) -> GroupResult:
    """The group's positions on the mirrored topics of the target, translated back to the source."""
    state = reader.group_states(reader.source, [group])[group]
    if not may_sync_group_offsets(state):
        return GroupResult(group, "refused", detail=f"active on {reader.source.alias} ({state})")
    offsets, untranslatable = failover.failback_offsets(
        target_committed=reader.committed_offsets(reader.target, [group])[group],
        source_topics=source_topics,
        store=reader.refresh_offset_syncs(),
        source_committed=reader.committed_offsets(reader.source, [group])[group],
    )
    note = (
        f"not translatable (older than the oldest offset sync): {', '.join(partition_label(*k) for k in untranslatable)}"
        if untranslatable
        else ""
    )
    return write_offsets(reader, reader.source, group=group, offsets=offsets, note=note)
