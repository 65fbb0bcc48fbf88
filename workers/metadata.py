"""A flow's metadata work on a worker: topic sync (the flow's plan), heartbeats, checkpoints, group sync.

Each run ticks the flow's `TopicMetadataSync` and `periodic_tasks_for_flow` (cached per process and
config version; each does its work when its own interval says so), then stores the flow's plan (the
source partitions whose remote partitions exist) for the supervisor and the slices.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from controlplane import runtime
from controlplane.models import FlowEventKind
from controlplane.runtime import FlowSpec
from replication.connector import TopicPartition
from replication.kafka.admin import TopicAdminError
from replication.kafka.flow_tasks import PeriodicTask, periodic_tasks_for_flow
from replication.kafka.topic_sync import TopicMetadataSync
from replication.policy import replication_policy_for
from workers import context
from workers.leases import metadata_lease_key
from workers.plans import FlowPlan

log = logging.getLogger(__name__)


@dataclass
class CachedMetadata:
    spec: FlowSpec
    topic_sync: TopicMetadataSync
    periodic: list[PeriodicTask]
    synced: bool = False  # the topic sync succeeded once: its partition list is real
    partitions: tuple[TopicPartition, ...] | None = None
    errors: tuple[str, ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, spec: FlowSpec) -> CachedMetadata:
        policy = replication_policy_for(spec.flow, known_aliases=spec.known_aliases)
        return cls(
            spec=spec,
            topic_sync=TopicMetadataSync(
                flow=spec.flow, source=spec.source, target=spec.target, policy=policy
            ),
            periodic=periodic_tasks_for_flow(
                flow=spec.flow, source=spec.source, target=spec.target, known_aliases=spec.known_aliases
            ),
        )

    def close(self) -> None:
        for task in self.periodic:
            try:
                task.close()
            except Exception:
                log.exception("closing %s of flow %s failed", type(task).__name__, self.spec.flow.name)


_CACHE: dict[int, CachedMetadata] = {}
_CACHE_LOCK = threading.Lock()


def _entry(spec: FlowSpec | None, flow_id: int) -> CachedMetadata | None:
    """The cached metadata tasks of the flow as configured now (None when it must not run)."""
    with _CACHE_LOCK:
        entry = _CACHE.get(flow_id)
        if entry is not None and (
            spec is None or not spec.runnable or entry.spec.config_version != spec.config_version
        ):
            del _CACHE[flow_id]
            entry.close()
            entry = None
        if entry is None and spec is not None and spec.runnable:
            entry = _CACHE[flow_id] = CachedMetadata.build(spec)
        return entry


def flow_metadata(*, flow_id: int, token: str) -> None:
    leases = context.leases()
    try:
        spec = runtime.runtime_flow_spec(flow_id=flow_id)
        entry = _entry(spec, flow_id)
        if spec is None:
            leases.delete_plan(flow_id)
        if entry is not None:
            with entry.lock:
                _tick(flow_id, entry)
    finally:
        leases.release(metadata_lease_key(flow_id), token)


def _tick(flow_id: int, entry: CachedMetadata) -> None:
    now = time.time()
    flow = entry.spec.flow
    try:
        entry.topic_sync.tick(now=now)
        entry.synced = True
    except TopicAdminError as exc:  # a cluster unreachable: the slices go on with the last plan
        log.warning("flow %s: topic metadata sync failed: %s", flow.name, exc)
    if entry.synced:
        partitions = tuple(entry.topic_sync.replicated_partitions())
        context.leases().save_plan(flow_id, FlowPlan(entry.spec.config_version, partitions))
        if partitions != entry.partitions:
            runtime.partition_statuses_prune(flow_id=flow_id, replicated=partitions)
            entry.partitions = partitions
    errors = entry.topic_sync.last_errors
    if errors != entry.errors:
        at = datetime.fromtimestamp(now, UTC)
        for error in errors:
            runtime.flow_event_record(flow_id=flow_id, kind=FlowEventKind.ERROR, message=error, at=at)
        entry.errors = errors
    for task in entry.periodic:
        try:
            task.tick(now=now)
        except Exception:
            log.exception("flow %s: %s failed; retrying at its next interval", flow.name, type(task).__name__)
