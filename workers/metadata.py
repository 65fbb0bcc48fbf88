"""A flow's metadata work on a worker: topic sync (the flow's plan), heartbeats, checkpoints, group sync.

Each run first asks this process's `ClusterHealth` whether the flow's source and target answer (a
probe and a circuit breaker per cluster, `workers.clusters`). When one does not, the run does nothing
else: once the breaker opens, the flow is FAULTED with "source cluster C unreachable: <reason>" (an
error event too) and its plan is withdrawn, so its chains wait instead of holding replication threads.
When both answer again, a flow faulted that way is recovered (ACTIVE) and the plan comes back.

Then it ticks the flow's `TopicMetadataSync` and `periodic_tasks_for_flow` (cached per process and
config version; each does its work when its own interval says so, every request bounded by
MIRRORPLANE_CLUSTER_TIMEOUT_S); the topic sync's errors become error events, its warnings (such as "ACL
sync unsupported by cluster X") warning events recorded once per flow. Then it stores the flow's plan
(the source partitions whose remote partitions exist) for the supervisor and the slices.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings

from controlplane.status import runtime
from controlplane.status.models import FlowEventKind
from controlplane.status.runtime import FlowSpec
from replication.checkpoint import MirrorCheckpointTask
from replication.connector import TopicPartition
from replication.kafka.admin import TopicAdminError
from replication.kafka.flow_tasks import PeriodicTask, periodic_internal_topics, periodic_tasks_for_flow
from replication.kafka.source_io import task_internal_topics
from replication.kafka.topic_sync import TopicMetadataSync
from replication.policy import replication_policy_for
from replication.schemas.flow import SchemaSyncTask
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
    schema_errors: tuple[str, ...] = ()  # of the schema sync's latest pass, already recorded as events
    schema_result: object = None  # the schema sync's pass last recorded in the flow's signals
    warned: set[str] = field(default_factory=set)  # warnings of the topic sync already reported
    acl_recorded: tuple[str | None] | None = None  # (the ACL sync condition) last recorded in the signals
    fault_reason: str | None = None  # the unreachable cluster this process last reported for the flow
    faulted: bool = False  # ... and the flow is FAULTED for it (a failing-over flow is not: its drain runs)
    emitted: dict[str, float] = field(default_factory=dict)  # kind -> newest emission not yet recorded
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, spec: FlowSpec) -> CachedMetadata:
        policy = replication_policy_for(spec.flow, known_aliases=spec.known_aliases)
        timeout_s = settings.MIRRORPLANE_CLUSTER_TIMEOUT_S
        emitted: dict[str, float] = {}
        return cls(
            spec=spec,
            topic_sync=TopicMetadataSync(
                flow=spec.flow,
                source=spec.source,
                target=spec.target,
                policy=policy,
                timeout_s=timeout_s,
                internal_topics=(
                    *task_internal_topics(spec.flow, source=spec.source, target=spec.target, policy=policy),
                    *periodic_internal_topics(spec.flow, target=spec.target, policy=policy),
                ),
            ),
            periodic=periodic_tasks_for_flow(
                flow=spec.flow,
                source=spec.source,
                target=spec.target,
                known_aliases=spec.known_aliases,
                reverse=spec.reverse,
                timeout_s=timeout_s,
                on_emit=emitted.__setitem__,
            ),
            emitted=emitted,
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
            spec is None
            or not spec.runnable
            or entry.spec.config_version != spec.config_version
            or entry.spec.reverse != spec.reverse
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
            leases.forget_flow(flow_id)
        # A run of the same flow still going (waiting on a cluster) is not waited for: this one ends.
        if entry is not None and entry.lock.acquire(blocking=False):
            try:
                if _clusters_answer(flow_id, entry):
                    _tick(flow_id, entry)
            finally:
                entry.lock.release()
    finally:
        leases.release(metadata_lease_key(flow_id), token)


def _clusters_answer(flow_id: int, entry: CachedMetadata) -> bool:
    """Both clusters of the flow answer (their breakers are closed); otherwise report which does not."""
    now = time.time()
    at = datetime.fromtimestamp(now, UTC)
    health = context.cluster_health()
    for role, cluster in (("source", entry.spec.source), ("target", entry.spec.target)):
        verdict = health.check(cluster, now=now)
        if verdict.reachable:
            continue
        if verdict.confirmed:
            reason = runtime.cluster_unreachable_reason(role=role, alias=cluster.alias, error=verdict.error)
            if reason != entry.fault_reason:
                log.error("flow %s: %s", entry.spec.flow.name, reason)
                entry.faulted = runtime.flow_fault_cluster_unreachable(flow_id=flow_id, reason=reason, at=at)
                entry.fault_reason = reason
            if entry.faulted:  # its chains wait instead of failing slice after slice
                context.leases().delete_plan(flow_id)
        return False
    if runtime.flow_recover_clusters_reachable(flow_id=flow_id, at=at):
        log.info("flow %s: its clusters answer again; replicating", entry.spec.flow.name)
    entry.fault_reason, entry.faulted = None, False
    return True


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
    _report_warnings_once(flow_id, entry, now=now)
    _record_acl_support(flow_id, entry)
    for task in entry.periodic:
        try:
            task.tick(now=now)
        except Exception:
            log.exception("flow %s: %s failed; retrying at its next interval", flow.name, type(task).__name__)
    _record_schema_sync(flow_id, entry, now=now)
    _record_emitted(flow_id, entry)


def _record_schema_sync(flow_id: int, entry: CachedMetadata, *, now: float) -> None:
    """The schema sync's latest pass in the flow's signals (subjects synced, versions behind), and its
    errors (a subject it could not sync, keep-ids refused, a registry that does not answer) as flow error
    events when they change."""
    sync = next((task for task in entry.periodic if isinstance(task, SchemaSyncTask)), None)
    result = sync.last_result if sync is not None else None
    if result is None or result is entry.schema_result:
        return
    at = datetime.fromtimestamp(now, UTC)
    runtime.flow_signals_record(
        flow_id=flow_id,
        schemas_synced_at=at,
        schemas_subjects=len(result.subjects),
        schemas_versions_behind=result.versions_behind,
        schemas_errors=len(result.errors),
        schemas_id_map={str(source): target for source, target in sorted(result.id_map.items())},
        schemas_refused=dict(sorted(result.refused.items())),
    )
    entry.schema_result = result
    errors = tuple(result.errors)
    if errors != entry.schema_errors:
        for error in errors:
            runtime.flow_event_record(
                flow_id=flow_id, kind=FlowEventKind.ERROR, message=f"schema sync: {error}", at=at
            )
        entry.schema_errors = errors


def _report_warnings_once(flow_id: int, entry: CachedMetadata, *, now: float) -> None:
    """The topic sync's warnings (ACL sync unsupported by a cluster) as flow warning events, each once."""
    for warning in entry.topic_sync.warnings:
        if warning in entry.warned:
            continue
        at = datetime.fromtimestamp(now, UTC)
        runtime.flow_event_record_once(flow_id=flow_id, kind=FlowEventKind.WARNING, message=warning, at=at)
        entry.warned.add(warning)


def _record_acl_support(flow_id: int, entry: CachedMetadata) -> None:
    """Whether ACL sync can run, as the latest ACL sync pass found, in the flow's signals when it changes
    (and at this process's first pass): the reason a cluster cannot take part, or None when it can, or ACL
    sync is off. The readiness score judges ACL parity by it (n/a while a cluster has no authorizer), so
    an authorizer added later counts from the next pass; the warning event stays as history."""
    enabled = entry.spec.flow.sync_topic_acls_enabled
    if enabled and not entry.topic_sync.acls_checked:
        return  # no pass yet in this process (a cluster unreachable): what is stored stands
    unsupported = "; ".join(entry.topic_sync.warnings) or None if enabled else None
    if entry.acl_recorded == (unsupported,):
        return
    runtime.flow_signals_record(flow_id=flow_id, acl_sync_unsupported=unsupported)
    entry.acl_recorded = (unsupported,)


def checkpoint_latency_ms(tasks: list[PeriodicTask]) -> float | None:
    """The worst group's latency of its newest checkpoint (MM2 checkpoint-latency-ms), None before any."""
    latencies = [
        group.checkpoint_latency_ms
        for task in tasks
        if isinstance(task, MirrorCheckpointTask)
        for group in task.metrics().values()
        if group.checkpoint_latency_ms is not None
    ]
    return max(latencies, default=None)


def _record_emitted(flow_id: int, entry: CachedMetadata) -> None:
    """The newest heartbeat and checkpoint emitted (with the checkpoints' latency), for the alert rules
    and /metrics."""
    if not entry.emitted:
        return
    emitted: dict[str, datetime | float] = {
        f"{kind}_emitted_at": datetime.fromtimestamp(at, UTC) for kind, at in entry.emitted.items()
    }
    latency = checkpoint_latency_ms(entry.periodic) if "checkpoint" in entry.emitted else None
    if latency is not None:
        emitted["checkpoint_latency_ms"] = latency
    entry.emitted.clear()
    try:
        runtime.flow_signals_record(flow_id=flow_id, **emitted)
    except Exception:
        log.exception("flow %s: recording heartbeat/checkpoint times failed", entry.spec.flow.name)
