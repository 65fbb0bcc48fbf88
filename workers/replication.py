"""One replication slice of a (flow, task index) chain, with the worker process's cached tasks.

A slice: hold the chain's lease, read the flow as stored now and its plan, decide (run, wait or stop:
`workers.plans.decide_slice`), run `MirrorSourceTask.run_slice` on the cached task (rebuilt when the
configuration changed or another worker ran the chain meanwhile), then store status, events and lake
samples. Pause, resume, config edits and new partitions therefore take effect at the next slice.

The cache keeps clients across slices: a chain's next slice goes to this worker's own queue (see
`workers.tasks`), so consecutive slices normally find their task here.

A warm shutdown (SIGTERM, a rolling upgrade or a scale-down) hands the chains over instead of leaving
them to expire (`workers.handover`): `DRAINING` ends the running slices early; the chain that succeeds one
starts here with a take-over slice (`_take_over`: its task built, the lease awaited).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import redis
from django.conf import settings
from django.db import IntegrityError

from controlplane.core import presence
from controlplane.status import partition_writes, runtime
from controlplane.status.models import FlowEventKind
from controlplane.status.partition_writes import StatusWrites
from controlplane.status.runtime import FlowSpec
from replication.config import OffsetSyncsTopicLocation
from replication.kafka.legacy_offset_syncs import move_legacy_offset_syncs
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import kafka_task_io
from replication.policy import replication_policy_for
from replication.schemas.flow import schema_id_rewriter
from replication.slices import TaskFenced, errors_text
from replication.source import MirrorSourceTask, SliceErrorKind, SliceResult
from workers import context
from workers.bridge import SliceBridge, bridge_max_s, merge_results, slice_records_left
from workers.fencing import AssignmentGuard, generation_fenced
from workers.lake import Counts, RemotePartition, lake_rows
from workers.leases import LeaseKeeper, task_lease_key
from workers.plans import (
    ChainPosition,
    PoolLoad,
    SliceAction,
    TaskRef,
    backoff_s,
    cached_task_is_current,
    decide_slice,
    stays_on_worker,
)

log = logging.getLogger(__name__)

WAIT_S = 1.0  # pause of a chain waiting for its flow's plan
FENCING_WAIT_S = 0.2  # pause of a chain waiting while another worker fences its flow's earlier generations
HAND_OVER_WAIT_S = 5.0  # a stopping worker waits this long at most for a successor to be ready
HAND_OVER_POLL_S = 0.01
DRAINING = threading.Event()  # a warm shutdown began: running slices end now, chains are handed over


@dataclass
class CachedTask:
    """A MirrorSourceTask kept by this process between the slices of its chain."""

    spec: FlowSpec
    task: MirrorSourceTask
    position_store: KafkaPositionStore
    guard: AssignmentGuard  # the assignment generation it writes for (workers.fencing)
    ran: ChainPosition | None = None
    counts: dict[RemotePartition, Counts] = field(default_factory=dict)
    last_slice_at: float = field(default_factory=time.time)
    failures: int = 0
    last_error: str | None = None
    recorded_sync_at: float | None = None  # the task's last offset sync time already recorded
    used_at: float = field(default_factory=time.monotonic)
    bridge: SliceBridge | None = None  # replicating until the chain's next slice takes the task
    status_writes: StatusWrites = field(default_factory=StatusWrites)  # rows as stored

    @classmethod
    def build(cls, spec: FlowSpec, task_index: int) -> CachedTask:
        _move_legacy_offset_syncs(spec)
        store = KafkaPositionStore(spec.target, source_alias=spec.flow.source)
        policy = replication_policy_for(spec.flow, known_aliases=spec.known_aliases)
        guard = AssignmentGuard(spec.flow_id)
        task = MirrorSourceTask(
            flow=spec.flow,
            policy=policy,
            task_index=task_index,
            position_store=store,
            schema_ids=schema_id_rewriter(
                flow=spec.flow,
                source=spec.source,
                target=spec.target,
                policy=policy,
                refused=lambda: runtime.schema_sync_refused(flow_id=spec.flow_id),
            ),
            schema_wait_error_s=settings.MIRRORPLANE_SCHEMA_WAIT_ERROR_S,
            io=kafka_task_io(
                spec.flow, source=spec.source, target=spec.target, policy=policy, task_index=task_index
            ),
            superseded=guard,
        )
        return cls(spec=spec, task=task, position_store=store, guard=guard)

    def admitted(self, generation: str) -> bool | None:
        """Whether the task writes for assignment `generation` (None: not admitted to any yet)."""
        return None if self.guard.generation is None else self.guard.generation == generation

    def stop_bridge(self) -> SliceResult | None:
        """Stop replicating between slices; what it did (None without a bridge)."""
        bridge, self.bridge = self.bridge, None
        return bridge.stop() if bridge is not None else None

    def close(self) -> None:
        """Stop the bridge, flush and persist what was acknowledged, then release the clients."""
        try:
            try:
                self.stop_bridge()
            finally:
                self.task.close()
        finally:
            self.position_store.close()


_LEGACY_SYNCS_MOVED: set[tuple[int, str]] = set()  # (flow id, target cluster identity) moved in this process


def _move_legacy_offset_syncs(spec: FlowSpec) -> None:
    """Before a task writes a sync: the flow's syncs under the legacy name move to MM2's name, one task of
    the flow at a time (the move is idempotent; the lock keeps two tasks from copying the same syncs), once
    per worker process: the topics are read whole, so later builds of the flow's tasks skip it."""
    if spec.flow.offset_syncs_topic_location != OffsetSyncsTopicLocation.TARGET:
        return
    done = (spec.flow_id, spec.target.identity())
    if done in _LEGACY_SYNCS_MOVED:
        return
    lock = context.leases().client.lock(
        f"mirrorplane:lock:flow:{spec.flow_id}:legacy-offset-syncs", timeout=120, blocking_timeout=120
    )
    with lock:
        move_legacy_offset_syncs(
            spec.flow,
            flows=runtime.runtime_flow_configs_into(target=spec.flow.target),
            target=spec.target,
            known_aliases=spec.known_aliases,
        )
    _LEGACY_SYNCS_MOVED.add(done)


class TaskCache:
    """This process's cached tasks; a slice takes its entry out while it runs (one user at a time)."""

    def __init__(self) -> None:
        self._entries: dict[TaskRef, CachedTask] = {}
        self._lock = threading.Lock()

    def take(self, ref: TaskRef) -> CachedTask | None:
        with self._lock:
            return self._entries.pop(ref, None)

    def put(self, ref: TaskRef, entry: CachedTask) -> None:
        entry.used_at = time.monotonic()
        with self._lock:
            self._entries[ref] = entry

    def close_idle(self, *, idle_s: float) -> None:
        """Close tasks whose chain went elsewhere (another worker took it, the flow was deleted)."""
        now = time.monotonic()
        with self._lock:
            idle = [ref for ref, entry in self._entries.items() if now - entry.used_at > idle_s]
            entries = [self._entries.pop(ref) for ref in idle]
        for ref, entry in zip(idle, entries, strict=True):
            log.info("closing idle task %s", ref)
            close_quietly(entry)

    def close_all(self) -> None:
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            close_quietly(entry)


TASKS = TaskCache()


def close_quietly(entry: CachedTask) -> None:
    try:
        entry.close()
    except Exception:
        log.exception("closing the task of flow %s failed", entry.spec.flow.name)


@dataclass(frozen=True)
class NextSlice:
    countdown_s: float
    sticky: bool  # to this worker's own queue (keeps the cached clients) or the shared one
    queue: str | None = None  # the shared one: the flow's pool queue (None: the default routing)


_WORKER_QUEUES: frozenset[str] | None = None  # what this worker consumes (None: not known yet)
_WORKER_NAME: str | None = None  # its Celery hostname, as its presence names it


def set_worker(*, name: str, queues: Iterable[str]) -> None:
    global _WORKER_QUEUES, _WORKER_NAME
    _WORKER_QUEUES, _WORKER_NAME = frozenset(queues), name


def pool_load(queue: str) -> PoolLoad | None:
    """The chains this worker holds and those of each other worker seen taking slices from `queue`
    (None when Redis cannot tell)."""
    try:
        others = presence.others_consuming(queue, own=_WORKER_NAME)
    except redis.RedisError as exc:
        log.warning("workers not seen (the chain is offered to the pool): %s", exc)
        return None
    held = tuple(int(worker.stats.get("leases_held", 0)) for worker in others)
    return PoolLoad(held=len(STATS.chains()), others=held)


def consumes(queue: str) -> bool:
    """Whether this worker takes slices from `queue` (a chain of a pool it does not serve moves on)."""
    return _WORKER_QUEUES is None or queue in _WORKER_QUEUES


class WorkerStats:
    """What this worker process did, for its presence announcement (controlplane.core.presence, /metrics)."""

    def __init__(self) -> None:
        self.slices = 0
        self.slice_errors = 0
        self._chains: dict[TaskRef, str] = {}  # chains that continue here (this process holds the lease)
        self._lock = threading.Lock()

    def slice_ran(self, *, ok: bool) -> None:
        with self._lock:
            self.slices += 1
            self.slice_errors += 0 if ok else 1

    def chain_step(self, ref: TaskRef, chain: str, *, continues: bool) -> None:
        with self._lock:
            if continues:
                self._chains[ref] = chain
            elif self._chains.get(ref) == chain:
                del self._chains[ref]

    def chains(self) -> dict[TaskRef, str]:
        with self._lock:
            return dict(self._chains)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {
                "slices": self.slices,
                "slice_errors": self.slice_errors,
                "leases_held": len(self._chains),
            }


STATS = WorkerStats()


class RunningSlices:
    """How many slices run in this process now; the hand-over waits until none does."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def __enter__(self) -> None:
        with self._idle:
            self._count += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._idle:
            self._count -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._count == 0, timeout=timeout_s)


RUNNING = RunningSlices()


def replicate_slice(*, ref: TaskRef, chain: str, seq: int, takes_over: bool = False) -> NextSlice | None:
    """Run slice `seq` of `chain`; what to enqueue next, or None when the chain ends. `takes_over`: the
    first slice of a chain a stopping worker hands over (`hand_over_chains`)."""
    if DRAINING.is_set():  # a slice received as the worker stops: its chain is handed over instead
        STATS.chain_step(ref, chain, continues=True)
        return NextSlice(countdown_s=0.0, sticky=False)
    with RUNNING:
        if takes_over and not _take_over(ref, chain):
            log.info("task %s: chain %s was never handed its lease; it ends", ref, chain[:8])
            return None
        following = _replicate_slice(ref=ref, chain=chain, seq=seq)
        STATS.chain_step(ref, chain, continues=following is not None)  # before a hand-over may look
    return following


def _replicate_slice(*, ref: TaskRef, chain: str, seq: int) -> NextSlice | None:
    leases = context.leases()
    key = task_lease_key(ref)
    ttl_s = settings.MIRRORPLANE_LEASE_TTL_S
    TASKS.close_idle(idle_s=ttl_s * 2)
    if not leases.hold(key, chain, ttl_s=ttl_s):
        log.info("task %s: chain %s lost its lease to another chain; it ends", ref, chain[:8])
        return None
    spec = runtime.runtime_flow_spec(flow_id=ref.flow_id)
    plan = leases.plan(ref.flow_id)
    decision = decide_slice(
        exists=spec is not None,
        runnable=spec is not None and spec.runnable,
        config_version=spec.config_version if spec else "",
        tasks_max=spec.flow.tasks_max if spec else 0,
        plan=plan,
        task_index=ref.task_index,
    )
    if decision.action is not SliceAction.RUN:
        entry = TASKS.take(ref)
        if entry is not None:
            close_quietly(entry)
        if decision.action is SliceAction.STOP:
            log.info("task %s: %s; its chain ends", ref, decision.reason)
            if decision.retired:
                _record_quietly(
                    ref, lambda: runtime.task_status_retire(flow_id=ref.flow_id, task_index=ref.task_index)
                )
            leases.release(key, chain)
            return None
        return NextSlice(countdown_s=WAIT_S, sticky=True)

    entry = TASKS.take(ref)
    if entry is not None and not (
        cached_task_is_current(cached=entry.ran, config_version=spec.config_version, chain=chain, seq=seq)
        and entry.admitted(decision.generation) is not False
    ):
        # Stale: positions may have moved elsewhere since it last ran, or the partitions were assigned
        # anew (its producer is fenced, or is about to be).
        close_quietly(entry)
        entry = None
    # A chain goes back to its pool's queue after one slice on a worker that does not serve its pool (the
    # flow's pool changed), and every MIRRORPLANE_REBALANCE_SLICES slices when that evens the pool.
    sticky = consumes(spec.queue) and stays_on_worker(
        seq=seq,
        rebalance_slices=settings.MIRRORPLANE_REBALANCE_SLICES,
        load=lambda: pool_load(spec.queue),
    )
    try:
        if entry is None or not entry.admitted(decision.generation):
            with LeaseKeeper(leases, key, chain, ttl_s=ttl_s):  # fencing many ids may take a while
                fenced = generation_fenced(spec=spec, generation=decision.generation, tasks=decision.tasks)
            if not fenced:  # another worker fences the earlier generations: this task waits for it
                if entry is not None:
                    TASKS.put(ref, entry)
                return NextSlice(countdown_s=FENCING_WAIT_S, sticky=True)
        if entry is None:
            entry = CachedTask.build(spec, ref.task_index)
        entry.guard.admit(generation=decision.generation, tasks=decision.tasks)
        carried = entry.stop_bridge()
        entry.task.assign(decision.partitions)
        with LeaseKeeper(leases, key, chain, ttl_s=ttl_s) as keeper:
            result = entry.task.run_slice(
                max_records=slice_records_left(
                    max_records=settings.MIRRORPLANE_SLICE_MAX_RECORDS, carried=carried
                ),
                max_seconds=settings.MIRRORPLANE_SLICE_SECONDS,
                # Settled (nothing in flight) when the next slice may run on another worker; else records
                # flow across the slice end, as in dedicated mode (positions: the acknowledged prefix).
                settle=not sticky,
                interrupt=DRAINING,  # a warm shutdown hands the chain over (hand_over_chains)
            )
        result = merge_results(carried, result)
    except Exception as exc:  # a broken client: rebuild it next slice, after a pause
        if isinstance(exc, TaskFenced):  # said when it was fenced (replication.source): one line here
            log.warning("task %s: %s", ref, exc)
        else:
            log.exception("task %s: slice failed", ref)
        STATS.slice_ran(ok=False)
        if entry is not None:
            close_quietly(entry)
        message = f"task {ref.task_index}: slice failed: {exc}"
        _record_quietly(ref, lambda: _event(ref, FlowEventKind.ERROR, message))
        return NextSlice(countdown_s=settings.MIRRORPLANE_BACKOFF_MAX_S, sticky=True)
    if keeper.lost.is_set():
        close_quietly(entry)
        return None
    # The partitions were assigned anew and this task's assignment fenced (workers.fencing): no failure,
    # the chain's next slice builds the task of the new assignment (or ends, its index retired).
    superseded = any(error.kind is SliceErrorKind.SUPERSEDED for error in result.errors)
    if superseded:
        result = replace(
            result, errors=tuple(e for e in result.errors if e.kind is not SliceErrorKind.SUPERSEDED)
        )
    entry.ran = ChainPosition(spec.config_version, chain, seq)
    entry.failures = 0 if result.ok else entry.failures + 1
    STATS.slice_ran(ok=result.ok)
    following = NextSlice(
        countdown_s=backoff_s(consecutive_failures=entry.failures, cap_s=settings.MIRRORPLANE_BACKOFF_MAX_S),
        sticky=sticky,
        queue=spec.queue,
    )
    now, mine = _metrics_snapshot(entry, decision.partitions)  # before the bridge uses the task
    if following.sticky and not following.countdown_s and not superseded:
        # Records keep flowing while this slice stores its status and the next one is enqueued and
        # started (workers.bridge): that hand-over is no gap they wait in.
        entry.bridge = slice_bridge(
            ref,
            entry,
            chain,
            max_s=bridge_max_s(slice_s=settings.MIRRORPLANE_SLICE_SECONDS, lease_ttl_s=ttl_s),
        )
    _record_quietly(ref, lambda: _record_slice(ref, entry, result, now=now, mine=mine))
    if superseded:
        close_quietly(entry)
    else:
        TASKS.put(ref, entry)
    return following


def _take_over(ref: TaskRef, chain: str) -> bool:
    """The first slice of a chain handed over by a stopping worker: build the task (its clients connect
    meanwhile), say it is ready, and wait for the lease (the stopping worker settles its task first);
    False when it does not come within a lease TTL (the chain ends; the supervisor starts another)."""
    leases, key, ttl_s = context.leases(), task_lease_key(ref), settings.MIRRORPLANE_LEASE_TTL_S
    spec = runtime.runtime_flow_spec(flow_id=ref.flow_id)
    if spec is not None and spec.runnable:
        stale = TASKS.take(ref)
        if stale is not None:
            close_quietly(stale)
        entry = CachedTask.build(spec, ref.task_index)
        try:  # the internal topics' writers, opened now rather than while the records wait
            entry.position_store.prepare()
            entry.task.prepare()
        except Exception as exc:  # the slice opens them itself
            log.warning("task %s: preparing the take-over failed: %s", ref, exc)
        entry.ran = ChainPosition(spec.config_version, chain, -1)  # current for the chain's slice 0
        TASKS.put(ref, entry)
    leases.announce_ready(key, chain, ttl_s=ttl_s)
    deadline = time.monotonic() + ttl_s + HAND_OVER_WAIT_S
    while not leases.hold(key, chain, ttl_s=ttl_s):  # also takes it if the stopping worker died
        if time.monotonic() > deadline:
            return False
        time.sleep(HAND_OVER_POLL_S)
    return True


def slice_bridge(ref: TaskRef, entry: CachedTask, chain: str, *, max_s: float) -> SliceBridge:
    return SliceBridge(
        entry.task,
        max_s=max_s,
        max_records=settings.MIRRORPLANE_SLICE_MAX_RECORDS,
        name=f"bridge-{ref.flow_id}-{ref.task_index}",
        leases=context.leases(),
        lease_key=task_lease_key(ref),
        chain=chain,
        lease_ttl_s=settings.MIRRORPLANE_LEASE_TTL_S,
    )


def chain_ended(ref: TaskRef, chain: str) -> None:
    """The chain of `ref` will not run another slice here (its lease lost): close its cached task (and
    its bridge); this worker no longer holds it."""
    STATS.chain_step(ref, chain, continues=False)
    entry = TASKS.take(ref)
    if entry is not None:
        close_quietly(entry)


def chain_offered(ref: TaskRef, chain: str) -> None:
    """The chain's next slice went to its pool's shared queue: any worker may take it, so this one no
    longer counts it among the chains it holds (its presence, the rebalancing, /metrics), unless it takes
    it again. Its cached task stays, for that case (closed when idle otherwise)."""
    STATS.chain_step(ref, chain, continues=False)


def _record_quietly(ref: TaskRef, record) -> None:
    """Status and metrics must never stop replication: a failed write is logged, the chain goes on. A
    write refused because the flow was deleted meanwhile is one line: the chain's next slice ends it."""
    try:
        record()
    except IntegrityError:
        if runtime.runtime_flow_spec(flow_id=ref.flow_id) is not None:
            log.exception("task %s: recording status or metrics failed", ref)
        else:
            log.info("task %s: its flow was deleted: status not recorded; the chain ends", ref)
    except Exception:
        log.exception("task %s: recording status or metrics failed", ref)


def _event(ref: TaskRef, kind: FlowEventKind, message: str) -> None:
    runtime.flow_event_record(flow_id=ref.flow_id, kind=kind, message=message, at=datetime.now(UTC))


def _metrics_snapshot(entry: CachedTask, partitions) -> tuple[float, list]:
    """(now, the metrics of the partitions assigned to the slice); the others are forgotten."""
    now = time.time()
    assigned = set(partitions)
    snapshot = entry.task.metrics.snapshot(now=now)
    for p in snapshot:
        if (p.source_topic, p.partition) not in assigned:
            entry.task.metrics.forget(topic=p.topic, partition=p.partition)
    return now, [p for p in snapshot if (p.source_topic, p.partition) in assigned]


def _record_slice(ref: TaskRef, entry: CachedTask, result: SliceResult, *, now: float, mine: list) -> None:
    at = datetime.fromtimestamp(now, UTC)
    partition_writes.partition_statuses_save(
        flow_id=ref.flow_id,
        task_index=ref.task_index,
        partitions=mine,
        task_error=_error_text(result),
        at=at,
        writes=entry.status_writes,
    )
    _record_errors(ref, entry, result)
    policy = entry.task.policy
    for gap in result.gap_events:
        runtime.flow_gap_record(
            flow_id=ref.flow_id,
            gap=gap,
            remote_topic=policy.format_remote_topic(entry.spec.flow.source, gap.topic),
            stopped=gap.resumed_offset == gap.expected_offset,
            at=at,
        )
    rows, entry.counts = lake_rows(
        flow_id=ref.flow_id,
        flow_name=entry.spec.flow.name,
        task_index=ref.task_index,
        worker=context.worker_name(),
        partitions=mine,
        previous=entry.counts,
        interval_s=now - entry.last_slice_at,
        at=at,
        topic_rows_above=settings.METRICS_TOPIC_ROWS_ABOVE,
    )
    entry.last_slice_at = now
    context.metrics_lake().append(rows)
    _record_signals(ref, entry, result, at=at)


def _record_signals(ref: TaskRef, entry: CachedTask, result: SliceResult, *, at: datetime) -> None:
    """When records were last replicated and offset syncs last emitted (the offset-syncs-stopped rule)."""
    signals = {}
    if result.records:
        signals["records_replicated_at"] = at
    synced = entry.task.last_offset_sync_at
    if synced is not None and synced != entry.recorded_sync_at:
        signals["offset_sync_emitted_at"] = datetime.fromtimestamp(synced, UTC)
        entry.recorded_sync_at = synced
    runtime.flow_signals_record(flow_id=ref.flow_id, **signals)


def _record_errors(ref: TaskRef, entry: CachedTask, result: SliceResult) -> None:
    """One event when a task starts failing, one when it recovers: a long outage is not a flood."""
    error = _error_text(result)
    if error is not None and entry.last_error is None:
        _event(ref, FlowEventKind.ERROR, f"task {ref.task_index} failing (retrying with backoff): {error}")
    elif error is None and entry.last_error is not None:
        _event(ref, FlowEventKind.INFO, f"task {ref.task_index} recovered: replicating again")
    entry.last_error = error


def _error_text(result: SliceResult) -> str | None:
    """The slice's errors as operators read them, bounded (`errors_text`); None when it had none."""
    return errors_text(result.errors)
