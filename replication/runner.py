"""MM2's dedicated mode: `python -m replication run mm2.properties` runs every enabled flow in one process.

Heartbeats are emitted for every ordered pair of clusters, enabled or not, unless `emit.heartbeats.enabled`
is false for it (MM2's `clusterPairs`): a flow A->B then carries B->A's heartbeats from A to B, so B sees A
upstream. Per flow: `TopicMetadataSync` creates and refreshes remote topics; the replicated partitions are split
over `tasks.max` `MirrorSourceTask`s (`connector.assign_partitions`), each driven by its own thread
(confluent-kafka releases the GIL while it waits on the network); the flow's periodic tasks (heartbeats,
checkpoints) tick on the main thread. New matching topics are picked up at `refresh.topics.interval`
and the partitions reassigned. SIGINT/SIGTERM or `duration_s` stop it: each task is closed (flush,
positions persisted) and the exit code is 0.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from replication.config import ClusterConfig, FlowConfig, Mm2Config
from replication.connector import TopicPartition, assign_partitions
from replication.gc_settings import freeze_after_startup
from replication.kafka.admin import TopicAdmin, TopicAdminError
from replication.kafka.fencing import TransactionsUnlisted, fence_transactional_ids, transactional_task_ids
from replication.kafka.flow_tasks import PeriodicTask, heartbeat_task_for_flow, periodic_tasks_for_flow
from replication.kafka.legacy_offset_syncs import move_legacy_offset_syncs
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import kafka_task_io, task_internal_topics, transactional
from replication.kafka.topic_sync import TopicMetadataSync
from replication.metrics import MirrorMetrics
from replication.policy import replication_policy_for
from replication.schemas.flow import SchemaSyncTask, schema_id_rewriter
from replication.source import MirrorSourceTask
from replication.stop_signals import stop_on_signals

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 5.0
STARTUP_TIMEOUT_S = 10.0
SLICE_SECONDS = 0.5


class StartupError(RuntimeError):
    pass


class _TaskThread(threading.Thread):
    """Runs slices of one MirrorSourceTask until stopped, or retired by a reassignment."""

    def __init__(
        self,
        *,
        task: MirrorSourceTask,
        name: str,
        stop: threading.Event,
        on_failure: Callable,
        prepare: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.task = task
        self._prepare = prepare
        self._stop_requested = stop
        self._on_failure = on_failure
        self._slice_lock = threading.Lock()
        self._may_run = threading.Event()
        self._may_run.set()
        self._retired = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Between two slices: everything the task produced is acknowledged and its positions saved."""
        self._may_run.clear()
        try:
            with self._slice_lock:
                if not self._retired:
                    for error in self.task.settle():  # slices do not settle: records flow across them
                        log.error("%s: %s", self.name, error)
                yield
        finally:
            self._may_run.set()

    def retire(self) -> None:
        """Close the task and let the thread end; only while paused, so no slice is running."""
        self._retired = True
        self.task.close()

    def run(self) -> None:
        try:
            self._prepare()
        except Exception as exc:  # the first persist opens them instead, and reports what fails then
            log.warning("%s: could not open the offset-syncs and positions writers yet: %s", self.name, exc)
        try:
            while not (self._stop_requested.is_set() or self._retired):
                if not self._may_run.wait(0.1):
                    continue
                with self._slice_lock:
                    if not self._retired:
                        self.task.run_slice(
                            max_seconds=SLICE_SECONDS, settle=False, return_when_caught_up=True
                        )
        except Exception as exc:  # a task failure stops the run: dedicated mode must not limp on silently
            log.exception("%s failed", self.name)
            self._on_failure(f"{self.name} failed: {exc}")

    def close(self) -> None:
        """Wait for the thread, then flush the task and persist its positions."""
        self.join()
        self.task.close()


@dataclass
class _Progress:
    at: float
    records: int


def _move_legacy_offset_syncs(flow: FlowConfig, *, config: Mm2Config, target: ClusterConfig) -> None:
    """Before the flow writes a sync: its syncs under the name older versions used move to MM2's name."""
    try:
        move_legacy_offset_syncs(flow, flows=config.flows, target=target, known_aliases=config.aliases)
    except Exception:  # the flow still runs; the move is retried at the next start
        log.exception("flow %s: moving offset syncs from their legacy topic failed", flow.name)


def _fence_earlier_runs(flow: FlowConfig, *, target: ClusterConfig) -> None:
    """Before any task starts: fence every transactional id of the flow the target's coordinators know
    (`replication.generations`), so that a frozen process of an earlier run, whose tasks.max or partitions
    may have differed, writes nothing once this run's tasks took its partitions."""
    try:
        used = transactional_task_ids(flow, target)
    except TransactionsUnlisted as exc:
        log.warning(
            "flow %s: %s; a frozen earlier run of it is fenced only for the task ids this run uses",
            flow.name,
            exc,
        )
        return
    try:
        fence_transactional_ids(flow, target, task_ids=used)
    except Exception as exc:  # the client's error says why (a missing grant, no answer)
        raise StartupError(
            f"flow {flow.name}: fencing the transactional ids of its earlier runs on {target.alias} "
            f"failed: {exc} (the target principal needs WRITE and DESCRIBE on TransactionalId mirrorplane-*)"
        ) from exc
    if used:
        log.info(
            "flow %s: the transactional ids of tasks 0..%d fenced before its tasks write", flow.name, used - 1
        )


class FlowRunner:
    """One flow: its topic sync, its source tasks (one thread each) and its periodic tasks."""

    def __init__(
        self, *, config: Mm2Config, flow: FlowConfig, stop: threading.Event, on_failure: Callable
    ) -> None:
        self.flow = flow
        self.source: ClusterConfig = config.cluster(flow.source)
        self.target: ClusterConfig = config.cluster(flow.target)
        self.policy = replication_policy_for(flow, known_aliases=config.aliases)
        self._stop_requested = stop
        self._on_failure = on_failure
        self.topic_sync = TopicMetadataSync(
            flow=flow,
            source=self.source,
            target=self.target,
            policy=self.policy,
            internal_topics=task_internal_topics(
                flow, source=self.source, target=self.target, policy=self.policy
            ),
        )
        self.metrics = MirrorMetrics()
        self.position_store = KafkaPositionStore(self.target, source_alias=flow.source)
        _move_legacy_offset_syncs(flow, config=config, target=self.target)
        if transactional(flow):
            _fence_earlier_runs(flow, target=self.target)
        self.periodic = periodic_tasks_for_flow(
            flow=flow,
            source=self.source,
            target=self.target,
            known_aliases=config.aliases,
            reverse=config.pair(flow.target, flow.source),
        )
        self.threads: list[_TaskThread] = []
        self._progress = _Progress(at=time.monotonic(), records=0)

    def _schema_sync_refused(self) -> dict[str, str]:
        """The subjects this flow's schema sync (one of its periodic tasks) refuses, for held records."""
        sync = next((task for task in self.periodic if isinstance(task, SchemaSyncTask)), None)
        return sync.refused if sync is not None else {}

    def tick(self, *, now: float) -> None:
        try:
            if self.topic_sync.tick(now=now):
                self._reassign(self.topic_sync.replicated_partitions())
        except TopicAdminError as exc:  # a cluster briefly unreachable: the tasks go on, retry next refresh
            log.warning("flow %s: topic metadata sync failed: %s", self.flow.name, exc)
        for task in self.periodic:
            try:
                task.tick(now=now)
            except Exception:
                log.exception(
                    "flow %s: %s failed; retrying at its next interval", self.flow.name, type(task).__name__
                )

    def _reassign(self, partitions: list[TopicPartition]) -> None:
        """Apply a new assignment with every task paused between slices.

        A partition moving to another task is then settled (acknowledged, positions saved) before its new
        owner starts it, so it never has two writers and the new owner resumes from a durable position;
        a retired task is closed before anyone resumes, so its last save cannot overwrite a newer one.
        """
        assignment = assign_partitions(partitions, self.flow.tasks_max)
        with contextlib.ExitStack() as pause_all:
            for thread in self.threads:
                pause_all.enter_context(thread.paused())
            for thread, task_partitions in zip(self.threads, assignment, strict=False):
                thread.task.assign(task_partitions)
            retired = self.threads[len(assignment) :]
            for thread in retired:
                thread.retire()
        for thread in retired:
            thread.join()
        del self.threads[len(assignment) :]
        for task_index in range(len(self.threads), len(assignment)):
            self.threads.append(self._start_task(task_index, assignment[task_index]))
        log.info(
            "flow %s: %d partition(s) over %d task(s)", self.flow.name, len(partitions), len(self.threads)
        )

    def _start_task(self, task_index: int, partitions: list[TopicPartition]) -> _TaskThread:
        task = MirrorSourceTask(
            flow=self.flow,
            policy=self.policy,
            task_index=task_index,
            position_store=self.position_store,
            metrics=self.metrics,
            schema_ids=schema_id_rewriter(
                flow=self.flow,
                source=self.source,
                target=self.target,
                policy=self.policy,
                refused=self._schema_sync_refused,
            ),
            io=kafka_task_io(
                self.flow, source=self.source, target=self.target, policy=self.policy, task_index=task_index
            ),
        )
        task.assign(partitions)

        def prepare() -> None:
            # The internal topics' writers open before the first slice, not at its first persist while
            # records wait (~55 ms each: the topic's check and the producer's metadata).
            self.position_store.prepare()
            task.prepare()

        thread = _TaskThread(
            task=task,
            name=f"{self.flow.name}#{task_index}",
            stop=self._stop_requested,
            on_failure=self._on_failure,
            prepare=prepare,
        )
        thread.start()
        return thread

    def log_progress(self, *, now: float) -> None:
        snapshot = self.metrics.snapshot()
        records = snapshot.records
        rate = (records - self._progress.records) / max(now - self._progress.at, 1e-9)
        self._progress = _Progress(at=now, records=records)
        log.info(
            "flow %s: %d records replicated (%.0f/s), %d records behind, %s seconds behind, %d task(s)",
            self.flow.name,
            records,
            rate,
            snapshot.records_behind,
            "unknown" if snapshot.seconds_behind is None else f"{snapshot.seconds_behind:.1f}",
            len(self.threads),
        )

    def close(self) -> None:
        for thread in self.threads:
            thread.close()
        for task in self.periodic:
            task.close()
        self.position_store.close()


def pair_heartbeat_tasks(config: Mm2Config, *, targets: tuple[str, ...] = ()) -> list[PeriodicTask]:
    """Heartbeat tasks of the pairs that emit heartbeats but run no flow here (the enabled flows' own
    heartbeat tasks are their `FlowRunner`'s)."""
    running = {(flow.source, flow.target) for flow in config.enabled_flows(targets or None)}
    return [
        heartbeat_task_for_flow(
            flow=pair,
            target=config.cluster(pair.target),
            policy=replication_policy_for(pair, known_aliases=config.aliases),
        )
        for pair in config.heartbeat_pairs(targets or None)
        if (pair.source, pair.target) not in running
    ]


def _tick_pair_heartbeats(tasks: Sequence[PeriodicTask], *, now: float) -> None:
    for task in tasks:
        try:
            task.tick(now=now)
        except Exception:
            log.exception("heartbeats of a cluster pair failed; retrying at the next interval")


def check_reachable(clusters: Sequence[ClusterConfig]) -> None:
    """Fail fast, naming the alias and bootstrap servers, when a cluster does not answer."""
    for cluster in clusters:
        try:
            TopicAdmin(cluster, timeout_s=STARTUP_TIMEOUT_S).broker_count()
        except TopicAdminError as exc:
            raise StartupError(str(exc)) from exc


def _log_stop(signum: int) -> None:
    log.info("received %s: stopping", signal.Signals(signum).name)


def run_dedicated(
    config: Mm2Config, *, targets: tuple[str, ...] = (), duration_s: float | None = None
) -> int:
    """Run every enabled flow (targeting `targets`, or all) and the heartbeats of every cluster pair (see
    the module docstring) until a signal or `duration_s`; exit code.

    Like MM2's dedicated mode, it runs when only heartbeat pairs target `targets` (`--clusters A` with only
    A->B enabled emits B->A's heartbeats on A), and refuses (2) only when nothing at all would run there.
    """
    flows = config.enabled_flows(targets or None)
    pairs = config.heartbeat_pairs(targets or None)
    if not flows and not pairs:
        which = f" targeting {', '.join(targets)}" if targets else ""
        print(
            f"error: no enabled flow and no heartbeat pair{which}; set e.g. A->B.enabled = true, "
            "or leave emit.heartbeats.enabled at true",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    signals = stop_on_signals(stop, on_signal=_log_stop)
    try:
        return _run_until_stopped(
            config, flows=flows, pairs=pairs, targets=targets, stop=stop, duration_s=duration_s
        )
    finally:
        signals.restore()


def _run_until_stopped(
    config: Mm2Config,
    *,
    flows: Sequence[FlowConfig],
    pairs: Sequence[FlowConfig],
    targets: tuple[str, ...],
    stop: threading.Event,
    duration_s: float | None,
) -> int:
    failures: list[str] = []

    def on_failure(message: str) -> None:
        failures.append(message)
        stop.set()

    aliases = {alias for flow in flows for alias in (flow.source, flow.target)}
    aliases |= {pair.target for pair in pairs}
    runners: list[FlowRunner] = []
    heartbeats: list[PeriodicTask] = []
    try:
        check_reachable([config.cluster(alias) for alias in sorted(aliases)])
        runners = [FlowRunner(config=config, flow=flow, stop=stop, on_failure=on_failure) for flow in flows]
        heartbeats = pair_heartbeat_tasks(config, targets=targets)
    except (StartupError, TopicAdminError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    log.info(
        "running %s; heartbeats of %s",
        ", ".join(flow.name for flow in flows) or "no flow",
        ", ".join(pair.name for pair in pairs) or "no pair",
    )
    freeze_after_startup()
    started = time.monotonic()
    next_progress = started + PROGRESS_INTERVAL_S
    try:
        while not stop.is_set():
            for runner in runners:
                runner.tick(now=time.time())
            _tick_pair_heartbeats(heartbeats, now=time.time())
            now = time.monotonic()
            if now >= next_progress:
                for runner in runners:
                    runner.log_progress(now=now)
                next_progress = now + PROGRESS_INTERVAL_S
            if duration_s is not None and now - started >= duration_s:
                break
            stop.wait(0.2)
    except Exception as exc:
        log.exception("replication stopped")
        failures.append(str(exc))
    finally:
        stop.set()
        for runner in runners:
            runner.close()
        for task in heartbeats:
            task.close()
        for runner in runners:
            runner.log_progress(now=time.monotonic())
    if failures:
        print(f"error: {'; '.join(failures)}", file=sys.stderr)
        return 1
    log.info("stopped cleanly")
    return 0
