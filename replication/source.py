"""`MirrorSourceTask`: copies its source partitions to the remote topics, MirrorMaker 2's way, in slices.

Each source partition is consumed by `assign()` and produced to the remote topic
(`policy.format_remote_topic`) on the same partition number with its key, value, every header in order
and its timestamp, by an idempotent producer, in order. A slice is bounded in records and time; it
ends with the producer flushed, the offset syncs emitted and acknowledged, and only then the positions
(next source offset per partition) persisted: a position never covers a record the target did not
acknowledge, nor a record whose offset sync is not durable. During a slice the same commit runs at
least every `PERSIST_INTERVAL_S` / `PERSIST_RECORDS`, and at most `MAX_IN_FLIGHT` records are
unacknowledged, which bounds what a crash leaves in doubt. Partitions a slice starts are started
together (one batched read of their offsets and remote tails).

Split as Kafka Connect splits a source task: this module is the runtime (fetch, produce, delivery
tracking, offset syncs before positions), driving the Protocols of `replication.task_io` (Kafka's in
`replication.kafka.source_io`, in-memory ones in the unit tests); the MM2 decisions it applies are the
pure functions of `replication.mirroring` and `replication.offset_syncs.OffsetSyncWriter`.

Delivery (docs/delivery-guarantees.md has the exact guarantee and its limits):

* `at_least_once`: a restart resumes from the stored position; records acknowledged after the last
  stored position are written again (duplicates, never loss).
* `exactly_once`: every mirrored record carries `mirrorplane.source-offset` (8-byte big-endian source
  offset) and the producer is gapless, so the remote partition always holds a prefix of what was sent.
  Starting a partition reads the remote partition's tail and resumes right after the last source
  offset found there, re-deriving the offset syncs of records written after the stored position.
  Assumes one writer per remote partition (the task assignment gives each partition to one task).

Data loss: when the next source offset no longer exists (retention deleted it, the topic was recreated
so its end is below the position), a `GapEvent` goes to the metrics and the log, and the partition
stops (`data.loss.policy=stop`, other partitions go on) or resumes at the earliest offset (`skip`).
The consumer never resets an offset by itself (`auto.offset.reset=error`).

Memory is bounded: a consumed batch is at most `CONSUME_BATCH` records, and while the producer queue is
full (`BufferError`) the task serves acknowledgements instead of consuming more.
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from replication.config import ClusterConfig, DataLossPolicy, DeliveryGuarantee, FlowConfig
from replication.fetching import fetch_plan
from replication.metrics import GapEvent, MirrorMetrics
from replication.mirroring import (
    SKIP,
    SOURCE_OFFSET_HEADER,
    DataLoss,
    detect_data_loss,
    gap_event,
    gap_suspected,
    header_rewriter,
    reread_start,
    resume_point,
    source_offset_of,
    waits_for_remote_partition,
)
from replication.offset_syncs import OffsetSyncEmitter, OffsetSyncWriter
from replication.policy import ReplicationPolicy
from replication.positions import PersistCadence, PositionStore, TopicPartition, position_record_due
from replication.schemas.ids import SchemaIdRewriter, SchemaWait
from replication.task_io import (
    PartitionReader,
    PartitionReadError,
    RecordSink,
    TaskIO,
    TransactionalSink,
    TransactionFailure,
)

__all__ = [  # the MM2 decisions the task runs are imported from here too
    "SOURCE_OFFSET_HEADER",
    "DataLoss",
    "MirrorSourceTask",
    "SliceError",
    "SliceErrorKind",
    "SliceResult",
    "TaskFenced",
    "detect_data_loss",
    "source_offset_of",
]

log = logging.getLogger(__name__)

# A slice waits this long at most for acknowledgements; what is still unacknowledged stays in flight
# and the position stays before it.
SLICE_FLUSH_TIMEOUT_S = 30.0
# A partition whose end stays below its position this long is checked for data loss (on Apache Kafka
# the broker reports such an offset as out of range at once; some brokers only return nothing).
GAP_CONFIRM_S = 2.0
# During a slice, positions (and offset syncs) are persisted at least this often: a crash makes a restart
# write again at most what was acknowledged since (at_least_once duplicates, exactly_once tail re-read).
PERSIST_INTERVAL_S = 0.2
PERSIST_RECORDS = 10_000
# Records produced and not yet acknowledged at most: what a crash leaves in doubt besides what was
# acknowledged since the last persist (a full producer queue would be 100,000 records in doubt).
MAX_IN_FLIGHT = 10_000
SINK_WARM_TIMEOUT_S = 10.0
# exactly_once: a partition whose remote partition the target does not know yet (just created) waits for
# it this long, retried each slice, before its start is an error (`waits_for_remote_partition`). Well
# under the time a chain stays on one worker (60 slices of 1 s): a task built elsewhere waits anew.
REMOTE_PARTITION_WAIT_S = 30.0
# rewrite-ids: a partition holding at a record whose schema the target registry lacks is an error (in the
# flow's status) once it waited this long: the schema sync runs every few seconds when it works.
SCHEMA_WAIT_ERROR_S = 30.0
# What a slice looks at besides the partitions that did something: the end-of-slice data-loss check and
# metrics visit the others in turn, each at least every ROTATION_PERIOD_S (a small task all at once).
ROTATION_PERIOD_S = 5.0
ROTATION_MINIMUM = 16
STARTED_LOGGED = 20  # partitions named in the line that says a topic's partitions started


class SliceErrorKind(enum.StrEnum):
    CONSUME = "consume"  # fetching a partition failed
    PRODUCE = "produce"  # a record could not be queued (too large, producer failed fatally)
    DELIVERY = "delivery"  # the target did not acknowledge a record: the partition restarts from it
    START = "start"  # a partition could not start (its offsets or remote tail unreadable)
    DATA_LOSS = "data_loss"  # data.loss.policy=stop stopped a partition
    OFFSET_SYNC = "offset_sync"  # emitting offset syncs failed: positions wait, retried
    PERSIST = "persist"  # persisting positions failed: retried
    SCHEMA = "schema"  # rewrite-ids: a partition waited longer than SCHEMA_WAIT_ERROR_S for a schema
    TRANSACTION = "transaction"  # a transaction could not commit: aborted, every partition restarts
    FENCED = "fenced"  # another producer of this task took over (a zombie's writes): this task stops
    # The flow's partitions were assigned anew and this task's assignment fenced (replication.generations):
    # it stops, the new assignment's tasks take its partitions over.
    SUPERSEDED = "superseded"


# What ends a pump at once: a transaction abandoned (its partitions restart), the task fenced or superseded.
STOPPING_KINDS = frozenset({SliceErrorKind.TRANSACTION, SliceErrorKind.FENCED, SliceErrorKind.SUPERSEDED})


class TaskFenced(RuntimeError):
    """`run_slice` on a task that was fenced: another producer of the same task took over (this one was a
    zombie), or the flow's partitions were assigned anew and the earlier assignment's tasks fenced
    (`replication.generations`). A new task may start; this one never writes."""


@dataclass(frozen=True)
class SliceError:
    """Something a slice could not do; `str()` is the message operators read."""

    kind: SliceErrorKind
    message: str
    partition: TopicPartition | None = None  # the source partition, when the error is about one

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SliceResult:
    records: int  # records acknowledged by the target during the slice
    bytes: int  # value bytes of those records
    positions: Mapping[TopicPartition, int]  # persisted next source offset per partition
    stopped_partitions: tuple[TopicPartition, ...] = ()
    gap_events: tuple[GapEvent, ...] = ()
    errors: tuple[SliceError, ...] = ()
    caught_up: bool = False  # ended early: nothing more to fetch and nothing in flight

    @property
    def ok(self) -> bool:
        return not self.errors


class Rotation:
    """Keys visited in turn: each `take` returns the next share, sized so that every key comes round at
    least every `period_s` (and at least `minimum` keys a time, so a small set is visited whole)."""

    def __init__(self, *, period_s: float, minimum: int) -> None:
        self.period_s, self.minimum = period_s, minimum
        self._keys: list[TopicPartition] = []
        self._next = 0
        self._taken_at: float | None = None

    def reset(self, keys: Sequence[TopicPartition]) -> None:
        self._keys, self._next = list(keys), 0

    def take(self, *, now: float) -> list[TopicPartition]:
        count = len(self._keys)
        elapsed = self.period_s if self._taken_at is None else now - self._taken_at
        self._taken_at = now
        share = min(count, max(self.minimum, math.ceil(count * max(elapsed, 0.0) / self.period_s)))
        start, self._next = self._next, (self._next + share) % count if count else 0
        return [self._keys[(start + i) % count] for i in range(share)]


class _Acknowledgements:
    """What the delivery reports of a task's partitions did since the task last looked, kept as they
    arrive so that the task never walks all its partitions to learn it: totals, and the partitions that
    heard a report (`touched`, each once) or failed a record."""

    __slots__ = ("records", "bytes", "touched", "failed")

    def __init__(self) -> None:
        self.records = self.bytes = 0
        self.touched: list[_PartitionState] = []
        self.failed: dict[TopicPartition, _PartitionState] = {}


class _PartitionState:
    """One source partition's replication state. `on_delivery` runs once per record: keep it lean."""

    __slots__ = (
        "acks",
        "touched",
        "persisted_at",
        "topic",
        "partition",
        "remote_topic",
        "in_flight",
        "next_offset",
        "failed_at",
        "error",
        "syncs",
        "acked_records",
        "acked_bytes",
        "last_acked",
        "observed_ack",
        "observed_records",
        "latency_ms",
        "last_polled_timestamp_ms",
        "polled",
        "skipped",
        "reported_records",
        "reported_bytes",
        "reported_skipped",
        "committed_records",
        "committed_bytes",
        "persisted",
        "stopped",
        "suspect_since",
        "schema_wait",
        "schema_wait_since",
        "held",
    )

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        remote_topic: str,
        start: int,
        offset_lag_max: int,
        acks: _Acknowledgements,
    ):
        self.topic, self.partition, self.remote_topic = topic, partition, remote_topic
        self.acks = acks
        self.touched = False  # listed in acks.touched since the task last collected them
        self.in_flight: deque[int] = deque()  # source offsets produced, not acknowledged, in order
        self.next_offset = start  # next source offset to consume
        self.failed_at: int | None = None
        self.error: str | None = None
        self.syncs = OffsetSyncWriter(topic=topic, partition=partition, offset_lag_max=offset_lag_max)
        self.acked_records = self.acked_bytes = self.skipped = 0
        self.reported_records = self.reported_bytes = self.reported_skipped = 0
        # Transactional: acked_records/bytes when a commit last included them (what counts as replicated).
        self.committed_records = self.committed_bytes = 0
        self.last_acked = self.observed_ack = None
        self.observed_records = 0  # acked_records when observed_ack was
        self.latency_ms: float | None = None
        self.last_polled_timestamp_ms: int | None = None
        self.polled = False
        self.persisted: int | None = None
        self.persisted_at: float | None = None  # when a position of this task was last written (clock)
        self.stopped = False
        self.suspect_since: float | None = None
        self.schema_wait: SchemaWait | None = None  # held at next_offset this slice (rewrite-ids)
        self.schema_wait_since: float | None = None  # when the hold began (kept until the record passes)
        self.held: tuple[int, SchemaWait] | None = None  # the offset held at and why, until it passes

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def position(self) -> int:
        """Next source offset to replicate: every record before it is acknowledged by the target."""
        if self.failed_at is not None:
            return self.failed_at
        return self.in_flight[0] if self.in_flight else self.next_offset

    def fail(self, offset: int, error: str) -> None:
        """The record at `offset` did not reach the target: the position stays at or before it."""
        if self.failed_at is None or offset < self.failed_at:
            self.failed_at, self.error = offset, error
        self.acks.failed[(self.topic, self.partition)] = self

    def on_delivery(self, error, message) -> None:
        # Delivery reports of one partition arrive in produce order (RecordSink's contract).
        upstream = self.in_flight.popleft()
        acks = self.acks
        if not self.touched:
            self.touched = True
            acks.touched.append(self)
        if error is not None:
            self.fail(upstream, error.str())
            return
        self.syncs.on_ack(upstream, message.offset())
        size = len(message)
        self.acked_records += 1
        self.acked_bytes += size
        acks.records += 1
        acks.bytes += size
        self.last_acked = message


class MirrorSourceTask:
    """The runtime of a source task: fetch, produce, delivery tracking, offset syncs and positions, driving
    the `TaskIO` Protocols and running the MM2 decisions of `replication.mirroring`."""

    def __init__(
        self,
        *,
        flow: FlowConfig,
        policy: ReplicationPolicy,
        task_index: int,
        position_store: PositionStore,
        source: ClusterConfig | None = None,
        target: ClusterConfig | None = None,
        io: TaskIO | None = None,
        metrics: MirrorMetrics | None = None,
        clock: Callable[[], float] = time.time,
        gap_confirm_s: float = GAP_CONFIRM_S,
        remote_partition_wait_s: float = REMOTE_PARTITION_WAIT_S,
        schema_ids: SchemaIdRewriter | None = None,
        superseded: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`io` reaches the clusters; without it, Kafka clients of `source` and `target` are made.
        `schema_ids` rewrites the schema IDs of keys and values (`rewrite-ids`). `superseded`: why this
        task's assignment is no longer the flow's (`replication.generations`), None while it is; asked
        before and after `init_transactions` (a superseded task never writes) and when it is fenced."""
        self.flow, self.source, self.target, self.policy = flow, source, target, policy
        self.task_index = task_index
        self.metrics = metrics if metrics is not None else MirrorMetrics(clock=clock)
        self._store = position_store
        self._clock = clock
        self._gap_confirm_s = gap_confirm_s
        self._remote_partition_wait_s = remote_partition_wait_s
        self._schema_ids = schema_ids
        self._superseded = superseded
        self._exactly_once = flow.delivery_guarantee == DeliveryGuarantee.EXACTLY_ONCE
        self._rewrite = header_rewriter(
            provenance_enabled=flow.provenance_header_enabled,
            exactly_once=self._exactly_once,
            source_alias=flow.source,
            target_alias=flow.target,
        )
        if io is None:
            if source is None or target is None:
                raise ValueError("MirrorSourceTask needs either io or both source and target clusters")
            from replication.kafka.source_io import kafka_task_io  # the default clients: Kafka's

            io = kafka_task_io(flow, source=source, target=target, policy=policy, task_index=task_index)
        self._io = io
        self._source = io.source
        self._sink: RecordSink = io.sink()
        self._emitter: OffsetSyncEmitter | None = None
        self.last_offset_sync_at: float | None = None  # when offset syncs were last acknowledged (clock)
        self._source_reader: PartitionReader | None = None
        self._target_reader: PartitionReader | None = None
        self._given: tuple[TopicPartition, ...] | None = None  # as `assign` last got them
        self._assigned: list[TopicPartition] = []
        self._assignment_changed = False  # or some assigned partition has not started yet
        self._states: dict[TopicPartition, _PartitionState] = {}
        # What the hot loop learns, kept per partition as it happens, so that no fetch walks every
        # partition (a task may hold thousands): the partitions of the current fetch (`_polled_now`) and
        # of the slice (`_fetched`), those that may have offset syncs to emit or a position to write
        # (`_dirty`), metrics to report (`_unreported`), not known to be read to their end
        # (`_unconfirmed`), holding for a schema (`_held`), whose end looks wrong (`_suspects`), stopped.
        self._acks = _Acknowledgements()
        self._polled_now: list[_PartitionState] = []
        self._fetched: list[_PartitionState] = []
        self._dirty: dict[TopicPartition, _PartitionState] = {}
        self._unreported: dict[TopicPartition, _PartitionState] = {}
        self._unconfirmed: dict[TopicPartition, _PartitionState] = {}
        # Transactional: partitions acknowledged in the open transaction, their latency observed at commit.
        self._uncommitted: dict[TopicPartition, _PartitionState] = {}
        self._held: dict[TopicPartition, _PartitionState] = {}
        self._suspects: dict[TopicPartition, _PartitionState] = {}
        self._stopped: set[TopicPartition] = set()
        self._rotation = Rotation(period_s=ROTATION_PERIOD_S, minimum=ROTATION_MINIMUM)
        self._known_positions: dict[TopicPartition, int] = {}
        self._looked_up: set[TopicPartition] = set()  # asked the position store already
        self._warmed_topics: set[str] = set()  # remote topics the current sink knows (_warm_sink)
        self._awaiting_remote: dict[TopicPartition, float] = {}  # partition -> when it began to wait (clock)
        self._out_of_range: set[TopicPartition] = set()
        self._restart_needed = False  # a delivery failed: restart every partition from its position
        self._reassign_needed = False
        self._closed = False
        # Transactional exactly_once (`TaskIO.transactional`): whether init_transactions ran on the current
        # sink, whether a transaction is open, and why this task was fenced (it then writes nothing).
        self._transaction_ready = False
        self._in_transaction = False
        self._fenced: str | None = None
        self._cadence = PersistCadence(
            interval_s=PERSIST_INTERVAL_S, records=PERSIST_RECORDS, now=time.monotonic()
        )

    # -- public API ---------------------------------------------------------------------------------
    @property
    def fenced(self) -> bool:
        """It stopped for good (fenced, or its assignment superseded): it never writes again."""
        return self._fenced is not None

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """The source partitions this task replicates; applied at the start of the next slice (the same
        ones again cost one comparison: a slice does not walk its partitions to learn nothing changed)."""
        given = tuple(partitions)
        if given != self._given:
            self._given = given
            self._assigned = sorted(set(given))
            self._assignment_changed = True

    def run_slice(
        self,
        *,
        max_records: int = 100_000,
        max_seconds: float = 1.0,
        settle: bool = True,
        return_when_caught_up: bool = False,
        interrupt: threading.Event | None = None,
    ) -> SliceResult:
        """Replicate for up to `max_seconds` / `max_records`, then emit offset syncs and persist positions.

        `settle` waits for every record in flight first, so nothing of this task is pending when the slice
        returns (what a caller needs before another process may take its partitions over). Without it,
        records keep flowing across slice ends and the positions saved are the acknowledged prefix (the
        first record still in flight); an owner that keeps the task calls `settle()` before handing
        partitions to another task.

        `return_when_caught_up` ends the slice before its time once a fetch finds nothing new, every
        record produced is acknowledged and the positions are persisted or due (`PERSIST_INTERVAL_S`)
        (`SliceResult.caught_up`), so progress is reported as soon as
        the task has copied everything there is, and an idle task does not hold its caller for the
        whole slice (a fetch still waits up to its timeout first, so calling again does not spin).

        `interrupt` ends the slice early once set (noticed within one fetch wait), as if its time had
        run out: another thread may stop a slice it started (`workers.bridge`).
        """
        if self._closed:
            raise RuntimeError("run_slice on a closed MirrorSourceTask")
        deadline = time.monotonic() + max_seconds
        errors: list[SliceError] = []
        if self._fenced is not None:  # a zombie: another producer of this task writes now
            raise TaskFenced(self._fenced)
        gaps: list[GapEvent] = []
        self._apply_assignment(errors)
        for state in self._held.values():
            state.schema_wait = None  # try again: the schema sync may have registered it meanwhile
        records_before, bytes_before = self._acks.records, self._acks.bytes
        caught_up = False
        if len(self._stopped) < len(self._states):
            try:
                caught_up = self._pump(
                    max_records=max_records,
                    deadline=deadline,
                    errors=errors,
                    return_when_caught_up=return_when_caught_up,
                    interrupt=interrupt,
                )
            except Exception as exc:  # a transactional producer raises its fatal errors (fenced) from poll()
                if not self._io.transactional:
                    raise
                self._transaction_failed("replicating", exc, errors)
                caught_up = False
        elif interrupt is not None:  # nothing to replicate: a slice still takes its time (no spinning)
            interrupt.wait(max(deadline - time.monotonic(), 0.0))
        else:
            time.sleep(max(deadline - time.monotonic(), 0.0))
        self._serve(SLICE_FLUSH_TIMEOUT_S if settle else 0.0, errors, flush=settle)
        now = self._clock()
        self._observe_polls(now)
        self._collect(now)
        self._check_deliveries(errors)
        swept = self._rotation.take(now=now)
        gaps.extend(self._check_data_loss(now=now, errors=errors, swept=swept))
        self._check_schema_waits(now=now, errors=errors)
        # Settled: the next slice may run elsewhere, so every moved position is written now.
        self._commit(now=now, errors=errors, every_position=settle)
        self._report_metrics(now, swept=swept)
        if self._reassign_needed and not self._restart_needed:
            self._assign_source()
        return SliceResult(
            records=self._acks.records - records_before,
            bytes=self._acks.bytes - bytes_before,
            positions=dict(self._known_positions),
            stopped_partitions=tuple(sorted(self._stopped)),
            gap_events=tuple(gaps),
            errors=tuple(errors),
            caught_up=caught_up,
        )

    def prepare(self) -> None:
        """Open now what the first slices would open while replicating (the offset-syncs topic and its
        writer), so that a task taking partitions over from a stopping worker does it before it holds
        them, not while their records wait (`workers.replication`)."""
        self._offset_sync_emitter().prepare()

    def _offset_sync_emitter(self) -> OffsetSyncEmitter:
        if self._emitter is None:
            self._emitter = self._io.offset_syncs()
        return self._emitter

    def settle(self) -> list[SliceError]:
        """Wait for every record in flight, emit the offset syncs and persist the positions; the errors."""
        errors: list[SliceError] = []
        if self._closed:
            return errors
        self._serve(SLICE_FLUSH_TIMEOUT_S, errors)
        self._after_flush(errors)
        return errors

    def close(self) -> None:
        """Flush, emit offset syncs, persist positions and close the clients."""
        if self._closed:
            return
        self._closed = True
        errors: list[SliceError] = []
        try:
            self._serve(self._io.settle_timeout_s, errors)
            self._after_flush(errors, final=True)
        finally:
            for client in (self._source, self._emitter, self._source_reader, self._target_reader):
                if client is not None:
                    _close_quietly(client)
        if errors:
            log.error(
                "flow %s task %d closed with errors: %s",
                self.flow.name,
                self.task_index,
                list(map(str, errors)),
            )

    def _after_flush(self, errors: list[SliceError], *, final: bool = False) -> None:
        """After every record settled (before partitions move, restart or close): every moved position
        is written, so whoever resumes them redoes nothing."""
        now = self._clock()
        self._observe_polls(now)
        self._collect(now)
        self._check_deliveries(errors)
        self._commit(now=now, errors=errors, final=final, every_position=True)
        self._report_metrics(now)

    # -- starting and stopping partitions -----------------------------------------------------------
    def _apply_assignment(self, errors: list[SliceError]) -> None:
        if not (self._assignment_changed or self._restart_needed or self._reassign_needed):
            return
        assigned = set(self._assigned)
        removed = [key for key in self._states if key not in assigned]
        if self._restart_needed or removed:
            # Every record settled (acknowledged or failed) and committed before partitions go or
            # restart, so no old delivery report can interleave with a restarted partition's records.
            self._serve(self._io.settle_timeout_s, errors)
            self._after_flush(errors, final=bool(removed))
        for key in removed:  # another task may advance it meanwhile: ask the store again if it returns
            self._looked_up.discard(key)
            self._known_positions.pop(key, None)
        self._awaiting_remote = {key: t for key, t in self._awaiting_remote.items() if key in assigned}
        before = set(self._states)
        if self._restart_needed:
            self._replace_sink()
            self._states = {key: state for key, state in self._states.items() if state.stopped}
            self._restart_needed = False
            self._reassign_needed = True  # the source must fetch again from the restarted positions
        self._states = {key: state for key, state in self._states.items() if key in assigned}
        to_start = [key for key in self._assigned if key not in self._states]
        if to_start:
            self._start_partitions(to_start, errors)
        self._assignment_changed = len(self._states) < len(assigned)  # retried next slice
        if set(self._states) != before or self._reassign_needed:
            self._states_changed()
            self._assign_source()

    def _states_changed(self) -> None:
        """The set of partition states changed: what is kept about them follows (once per change)."""
        states = self._states
        self._stopped = {key for key, state in states.items() if state.stopped}
        for kept in (
            self._dirty,
            self._unreported,
            self._unconfirmed,
            self._uncommitted,
            self._held,
            self._suspects,
        ):
            for key in [key for key, state in kept.items() if states.get(key) is not state]:
                del kept[key]
        self._acks.failed = {
            key: state for key, state in self._acks.failed.items() if states.get(key) is state
        }
        self._rotation.reset(list(states))

    def _replace_sink(self) -> None:
        self._warmed_topics.clear()
        try:
            self._sink.flush(self._io.settle_timeout_s)
        except Exception:  # a transactional producer that failed fatally: what it held is aborted
            log.debug(
                "flow %s task %d: flushing the old producer", self.flow.name, self.task_index, exc_info=True
            )
        self._sink = self._io.sink()
        self._transaction_ready = self._in_transaction = False

    def _start_partitions(self, keys: list[TopicPartition], errors: list[SliceError]) -> None:
        """Start these partitions together: every offset and tail read is one request for all of them."""
        unknown = [key for key in keys if key not in self._looked_up]
        if unknown:
            self._known_positions.update(self._store.load(flow=self.flow.name, partitions=unknown))
            self._looked_up.update(unknown)
        remote_topics = {key: self.policy.format_remote_topic(self.flow.source, key[0]) for key in keys}
        starts = {key: self._known_positions[key] for key in keys if key in self._known_positions}
        failures: dict[TopicPartition, PartitionReadError] = {}
        if len(starts) < len(keys):  # never replicated: start at the earliest source offset
            earliest, failures = self._reader("source").watermarks_all([k for k in keys if k not in starts])
            starts.update({key: low for key, (low, _) in earliest.items()})
        states = {
            key: _PartitionState(
                topic=key[0],
                partition=key[1],
                remote_topic=remote_topics[key],
                start=starts[key],
                offset_lag_max=self.flow.offset_lag_max,
                acks=self._acks,
            )
            for key in keys
            if key in starts
        }
        if states and not self._init_transactions(states, remote_topics, errors):
            return
        if self._exactly_once:
            remote_failures = self._recover_from_target(states)
            waiting = self._waiting_for_remote(remote_failures, remote_topics)
            failures.update({key: exc for key, exc in remote_failures.items() if key not in waiting})
            for key in waiting:
                states.pop(key, None)
        for key, exc in failures.items():  # retried next slice
            states.pop(key, None)
            self._record_error(
                SliceError(SliceErrorKind.START, f"cannot start: {exc}", key), remote_topics[key], errors
            )
        self._warm_sink({state.remote_topic for state in states.values()})
        started: dict[tuple[str, str], list[str]] = defaultdict(list)
        for key, state in states.items():
            self._awaiting_remote.pop(key, None)
            state.persisted = self._known_positions.get(key)
            self._states[key] = state
            # Dirty: exactly_once recovery may have re-derived offset syncs (and moved the position).
            self._dirty[key] = self._unreported[key] = self._unconfirmed[key] = state
            started[(state.topic, state.remote_topic)].append(f"{state.partition}@{state.next_offset}")
        for (topic, remote_topic), partitions in started.items():  # one line per topic, not per partition
            log.info(
                "flow %s task %d: replicating %s -> %s, %d partition(s) from (partition@offset) %s",
                self.flow.name,
                self.task_index,
                topic,
                remote_topic,
                len(partitions),
                " ".join(partitions[:STARTED_LOGGED]) + (" ..." if len(partitions) > STARTED_LOGGED else ""),
            )

    def _init_transactions(
        self,
        states: Mapping[TopicPartition, _PartitionState],
        remote_topics: Mapping[TopicPartition, str],
        errors: list[SliceError],
    ) -> bool:
        """Transactional: before the committed tails are read, fence every earlier producer of this task
        (a zombie) and abort what it or a crash left open; once per sink. Whether the partitions may start."""
        if not self._io.transactional or self._transaction_ready:
            return True
        if self._stop_if_superseded("initialising transactions", errors):
            return False
        sink: TransactionalSink = self._sink  # type: ignore[assignment]
        try:
            sink.init_transactions(SLICE_FLUSH_TIMEOUT_S)
        except Exception as exc:  # retried next slice (a new sink if this one cannot go on)
            if self._io.transaction_failure(exc) != TransactionFailure.RETRY:
                self._replace_sink()
            for key in states:
                self._record_error(
                    SliceError(
                        SliceErrorKind.START,
                        f"cannot start: initialising the transactions of {self.flow.name} task "
                        f"{self.task_index} on {self.flow.target} failed: {exc} (the target principal "
                        "needs WRITE and DESCRIBE on TransactionalId mirrorplane-*; or set "
                        f"{self.flow.name}.exactly.once.transactions = false)",
                        key,
                    ),
                    remote_topics[key],
                    errors,
                )
            return False
        if self._stop_if_superseded("initialising transactions", errors):  # a fencing begun meanwhile
            return False
        self._transaction_ready = True
        return True

    def _stop_if_superseded(self, doing: str, errors: list[SliceError]) -> bool:
        """A task of an assignment the flow no longer has stops for good before it writes (as if fenced)."""
        reason = self._superseded()
        if reason is not None:
            self._stop_fenced(
                SliceError(
                    SliceErrorKind.SUPERSEDED,
                    f"flow {self.flow.name} task {self.task_index} stops while {doing}: {reason}",
                ),
                errors,
            )
        return reason is not None

    def _waiting_for_remote(
        self,
        failures: Mapping[TopicPartition, PartitionReadError],
        remote_topics: Mapping[TopicPartition, str],
    ) -> set[TopicPartition]:
        """The partitions of `failures` that wait for their remote partition (`waits_for_remote_partition`):
        no error, retried next slice, logged at INFO when they begin to wait. The others are start errors."""
        now = self._clock()
        waiting: set[TopicPartition] = set()
        begun: dict[str, list[int]] = defaultdict(list)
        for key, exc in failures.items():
            if exc.unknown_partition and key not in self._awaiting_remote:
                self._awaiting_remote[key] = now
                begun[remote_topics[key]].append(key[1])
            if waits_for_remote_partition(
                unknown_partition=exc.unknown_partition,
                waiting_since=self._awaiting_remote.get(key, now),
                now=now,
                wait_s=self._remote_partition_wait_s,
            ):
                waiting.add(key)
        for remote_topic, partitions in begun.items():
            log.info(
                "flow %s task %d: waiting for remote topic %s to be created (partitions %s); retried each slice",
                self.flow.name,
                self.task_index,
                remote_topic,
                ", ".join(map(str, sorted(partitions))),
            )
        return waiting

    def _warm_sink(self, remote_topics: set[str]) -> None:
        """The producer learns the remote topics before their first records: a new producer's first records
        otherwise waited 0.5-1 s for its metadata (measured: the first 10,000 records of a dedicated task
        were acknowledged after a whole 0.5 s slice). Only topics about to be written: on brokers that
        create topics on a metadata request, producing would ask the same."""
        for topic in sorted(remote_topics - self._warmed_topics):
            try:
                self._sink.list_topics(topic, timeout=SINK_WARM_TIMEOUT_S)
            except Exception as exc:  # not needed for correctness: the first records wait instead
                log.info(
                    "flow %s task %d: metadata of %s not known yet: %s",
                    self.flow.name,
                    self.task_index,
                    topic,
                    exc,
                )
                continue
            self._warmed_topics.add(topic)

    def _recover_from_target(
        self, states: Mapping[TopicPartition, _PartitionState]
    ) -> dict[TopicPartition, PartitionReadError]:
        """exactly_once: resume each partition after the last source offset its remote partition holds
        (`replication.mirroring.resume_point`), re-deriving the offset syncs of the records written after
        the stored position, which the crash may have prevented. All partitions are read together; the
        ones that fail are returned."""
        reader = self._reader("target")
        by_remote = {(state.remote_topic, state.partition): state for state in states.values()}
        tails, failures = reader.tails(list(by_remote))
        rereads: dict[TopicPartition, int] = {}
        for remote, tail in tails.items():
            start = reread_start(stored=by_remote[remote].next_offset, tail=tail)
            if start is not None:
                rereads[remote] = start
        written, reread_failures = reader.read_all_to_end(rereads)
        failures.update(reread_failures)
        for remote, records in written.items():
            state = by_remote[remote]
            stored = state.next_offset
            state.next_offset, acknowledged = resume_point(stored=stored, written=records)
            for upstream, downstream in acknowledged:
                state.syncs.on_ack(upstream, downstream)
            log.info(
                "flow %s: %s[%d] already holds source offsets up to %d: resuming at %d (stored %d)",
                self.flow.name,
                *remote,
                state.next_offset - 1,
                state.next_offset,
                stored,
            )
        return {(by_remote[remote].topic, remote[1]): exc for remote, exc in failures.items()}

    def _reader(self, side: str) -> PartitionReader:
        if side == "source":
            if self._source_reader is None:
                self._source_reader = self._io.source_reader()
            return self._source_reader
        if self._target_reader is None:
            self._target_reader = self._io.target_reader()
        return self._target_reader

    def _assign_source(self) -> None:
        self._reassign_needed = False
        self._source.assign(
            {key: state.next_offset for key, state in self._states.items() if not state.stopped}
        )

    # -- the hot loop -------------------------------------------------------------------------------
    def _pump(
        self,
        *,
        max_records: int,
        deadline: float,
        errors: list[SliceError],
        return_when_caught_up: bool,
        interrupt: threading.Event | None,
    ) -> bool:
        """Fetch and produce until the deadline or `max_records`; whether it ended caught up."""
        fetch = self._source.fetch
        sink = self._sink
        produce = sink.produce
        poll = sink.poll
        states = self._states
        polled = self._polled_now
        rewrite = self._rewrite
        schema_ids = self._schema_ids
        transactional = self._io.transactional
        taken = 0
        while taken < max_records:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (interrupt is not None and interrupt.is_set()):
                break
            in_flight_now = len(sink)
            room = MAX_IN_FLIGHT - in_flight_now
            if room <= 0:  # the target is behind: serve acknowledgements, fetch nothing more
                poll(min(remaining, 0.05))
                if not self._persist_if_due(errors):
                    return False
                continue
            plan = fetch_plan(
                remaining_s=remaining,
                records_left=max_records - taken,
                room=room,
                in_flight=in_flight_now,
            )
            # The first record as soon as there is one, then what is fetched already: no waiting for a
            # batch to fill (replication.fetching).
            messages = fetch(first_wait_s=plan.first_wait_s, max_records=plan.batch)
            taken += len(messages)
            if (
                messages
                and transactional
                and not self._in_transaction
                and not self._begin_transaction(errors)
            ):
                return False
            last_topic, last_partition, state = None, -1, None
            remote_topic = on_delivery = in_flight = None
            for message in messages:
                if message.error() is not None:
                    self._on_fetch_error(message, errors)
                    continue
                topic, partition = message.topic(), message.partition()
                if partition != last_partition or topic != last_topic:
                    last_topic, last_partition = topic, partition
                    state = states.get((topic, partition))
                    if state is None or state.stopped or state.schema_wait is not None:
                        state = None  # fetched before a reassignment: not ours any more
                        continue
                    if state.last_polled_timestamp_ms is None:  # its first records of this fetch
                        polled.append(state)
                    remote_topic, on_delivery, in_flight = (
                        state.remote_topic,
                        state.on_delivery,
                        state.in_flight,
                    )
                elif state is None:
                    continue
                offset = message.offset()
                timestamp_type, timestamp = message.timestamp()
                headers = message.headers()
                state.last_polled_timestamp_ms = timestamp
                if rewrite is not None:
                    headers = rewrite(headers, offset)
                    if headers is SKIP:
                        state.skipped += 1
                        state.next_offset = offset + 1
                        continue
                key, value = message.key(), message.value()
                if schema_ids is not None:
                    try:
                        key, value = schema_ids.rewrite(key), schema_ids.rewrite(value)
                    except SchemaWait as wait:
                        self._hold_for_schema(state, offset, wait)
                        state = None  # its other records fetched with it wait as well
                        continue
                while True:
                    try:
                        produce(
                            remote_topic,
                            value=value,
                            key=key,
                            partition=partition,
                            # 0 asks the producer for "now": only when the source record has none.
                            timestamp=timestamp if timestamp_type else 0,
                            headers=headers,
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:  # the target is behind: serve acks, fetch nothing more
                        poll(0.05)
                        # The position stays before this record: not sent yet.
                        if not self._persist_if_due(errors):
                            return False
                    except Exception as exc:  # too large, or the producer failed fatally
                        state.fail(offset, str(exc))
                        self._record_error(
                            SliceError(
                                SliceErrorKind.PRODUCE,
                                f"producing {topic}[{partition}] offset {offset}: {exc}",
                                state.key,
                            ),
                            remote_topic,
                            errors,
                        )
                        self._restart_needed = True
                        return False
                in_flight.append(offset)
                state.next_offset = offset + 1  # only now: a position may be persisted in between
            poll(0)
            if messages:
                now = self._clock()
                self._observe_polls(now)
                self._collect(now)
            elif (
                return_when_caught_up
                and not len(sink)
                and self._fetched_to_end()
                and (
                    self._persisted_all() or self._cadence.due(now=time.monotonic(), acked=self._acks.records)
                )
            ):
                # Caught up. A stream that merely paused for a moment goes on until its positions are due
                # anyway: each slice end persists, which blocks this loop for a round trip.
                return True
            if not self._persist_if_due(errors):
                return False
        return False

    def _hold_for_schema(self, state: _PartitionState, offset: int, wait: SchemaWait) -> None:
        """rewrite-ids: the partition stays at `offset` (fetched again from there next slice) because its
        record names a schema the target registry does not hold yet; never sent with a wrong ID."""
        state.schema_wait = wait
        state.next_offset = offset
        state.held = (offset, wait)
        self._held[state.key] = state
        self._reassign_needed = True
        if state.schema_wait_since is None:
            state.schema_wait_since = self._clock()
            log.info(
                "flow %s task %d: %s[%d] waits at offset %d: %s",
                self.flow.name,
                self.task_index,
                state.topic,
                state.partition,
                offset,
                wait,
            )

    def _check_schema_waits(self, *, now: float, errors: list[SliceError]) -> None:
        """A held partition is released once its record at the held offset is sent (its position moved
        past it); a slice that did not fetch it again (a seek takes a fetch to apply) keeps the hold and
        its clock, so the error comes SCHEMA_WAIT_ERROR_S after the hold began whatever the slices."""
        for key, state in list(self._held.items()):
            offset, wait = state.held
            if state.schema_wait is None and (state.position > offset or state.stopped):
                state.schema_wait_since, state.held = None, None
                del self._held[key]
            elif now - state.schema_wait_since >= SCHEMA_WAIT_ERROR_S:
                self._record_error(
                    SliceError(
                        SliceErrorKind.SCHEMA,
                        f"{state.topic}[{state.partition}] has waited {now - state.schema_wait_since:.0f}s "
                        f"at offset {offset}: {state.schema_wait or wait}",
                        state.key,
                    ),
                    state.remote_topic,
                    errors,
                )

    def _fetched_to_end(self) -> bool:
        """Every running partition was read to the end its source reports: a fetch that found nothing is
        not "caught up" before the consumer knows where the end is (a new consumer's first fetches come
        back empty while it looks up its partitions' leaders and offsets).

        Only the partitions started or fetched since they were last found at their end are asked, up to
        the first one that is not: an empty fetch of a caught-up task asks the source nothing."""
        unconfirmed = self._unconfirmed
        while unconfirmed:
            key, state = next(iter(unconfirmed.items()))
            if not state.stopped:
                watermarks = self._source.watermarks(*key)
                if watermarks is None:
                    return False
                position = self._source.position(*key)
                if max(position if position is not None else -1, state.next_offset) < watermarks[1]:
                    return False
            del unconfirmed[key]
        return True

    def _persisted_all(self) -> bool:
        """No acknowledgement since the last commit and every position it looked at written."""
        return not self._acks.touched and all(
            state.position == state.persisted for state in self._dirty.values()
        )

    def _persist_if_due(self, errors: list[SliceError]) -> bool:
        """Persist mid-slice on the cadence; a failure is logged and retried, the slice end reports it.
        False when the pump must stop: a transaction was abandoned (its partitions restart) or fenced,
        which goes to `errors` at once (the slice end does not see it again)."""
        due = self._cadence.due(now=time.monotonic(), acked=self._acks.records)
        if due:
            failed: list[SliceError] = []
            if not self._commit(now=self._clock(), errors=failed):
                self._cadence.persisted(now=time.monotonic(), acked=self._acks.records)
            errors.extend(e for e in failed if e.kind in STOPPING_KINDS)
        return not (self._restart_needed or self._fenced)

    def _on_fetch_error(self, message, errors: list[SliceError]) -> None:
        error = message.error()
        if self._source.is_benign(error):
            return
        key = (message.topic(), message.partition()) if message.topic() else None
        state = self._states.get(key) if key else None
        if state is not None and self._source.is_out_of_range(error):
            self._out_of_range.add(key)
            return
        text = f"consuming {key[0]}[{key[1]}]: {error.str()}" if key else f"consumer: {error.str()}"
        if state is not None:
            self._record_error(SliceError(SliceErrorKind.CONSUME, text, key), state.remote_topic, errors)
        else:
            log.warning("flow %s task %d: %s", self.flow.name, self.task_index, text)

    def _observe_polls(self, now: float) -> None:
        """The partitions of the last fetch: their record age, and what the slice keeps about them."""
        polled = list(self._polled_now)
        self._polled_now.clear()
        states = self._states
        for state in polled:
            self.metrics.record_polled(
                topic=state.remote_topic,
                partition=state.partition,
                source_topic=state.topic,
                record_age_ms=max(now * 1000 - state.last_polled_timestamp_ms, 0.0),
                now=now,
            )
            state.last_polled_timestamp_ms = None
            key = state.key
            if states.get(key) is state:
                # A skipped record moves the position without an acknowledgement.
                self._dirty[key] = self._unreported[key] = self._unconfirmed[key] = state
                if not state.polled:
                    state.polled = True
                    self._fetched.append(state)

    def _collect(self, now: float) -> None:
        """The partitions that heard delivery reports since the last call: their replication latency, and
        their offset syncs, positions and metrics to commit and report."""
        touched, self._acks.touched = self._acks.touched, []
        states = self._states
        for state in touched:
            state.touched = False
            key = state.key
            if states.get(key) is not state:  # restarted or gone meanwhile: its reports are no news
                continue
            self._dirty[key] = self._unreported[key] = state
            if self._in_transaction:  # replicated once committed: observed then (`_transaction_committed`)
                self._uncommitted[key] = state
            else:
                self._observe_latency(state, now)

    def _observe_latency(self, state: _PartitionState, now: float) -> None:
        """The replication latency of the partition's newest acknowledged record, weighted by the records
        acknowledged since the last observation (MM2's replication-latency-ms)."""
        if state.last_acked is state.observed_ack:
            return
        state.observed_ack = state.last_acked
        state.latency_ms = max(now * 1000 - state.last_acked.timestamp()[1], 0.0)
        self.metrics.record_latency(
            topic=state.remote_topic,
            partition=state.partition,
            source_topic=state.topic,
            latency_ms=state.latency_ms,
            records=state.acked_records - state.observed_records,
            now=now,
        )
        state.observed_records = state.acked_records

    # -- after the loop -----------------------------------------------------------------------------
    def _check_deliveries(self, errors: list[SliceError]) -> None:
        failed, self._acks.failed = self._acks.failed, {}
        for key, state in failed.items():
            if self._states.get(key) is state and state.failed_at is not None:
                self._record_error(
                    SliceError(
                        SliceErrorKind.DELIVERY,
                        f"delivery of {state.topic}[{state.partition}] offset {state.failed_at} to "
                        f"{state.remote_topic} failed: {state.error}; the partition restarts from there",
                        state.key,
                    ),
                    state.remote_topic,
                    errors,
                )
                self._restart_needed = True

    def _check_data_loss(
        self, *, now: float, errors: list[SliceError], swept: Sequence[TopicPartition]
    ) -> list[GapEvent]:
        """The partitions reported out of range, those fetched this slice or whose end looked wrong
        already, and the `swept` share of the others (every one within `ROTATION_PERIOD_S`)."""
        events: list[GapEvent] = []
        states = self._states
        checked = {key: states[key] for key in (*self._out_of_range, *swept) if key in states}
        checked.update(self._suspects)
        checked.update((state.key, state) for state in self._fetched)
        for key, state in checked.items():
            if (
                states.get(key) is not state
                or state.stopped
                or state.in_flight
                or state.failed_at is not None
            ):
                continue
            reported = key in self._out_of_range
            looks_wrong = not reported and self._end_looks_wrong(state, now)
            if state.suspect_since is None:
                self._suspects.pop(key, None)
            else:
                self._suspects[key] = state
            if not reported and not looks_wrong:
                continue
            self._out_of_range.discard(key)
            try:
                low, end, _ = self._reader("source").tail(state.topic, state.partition)
            except PartitionReadError as exc:
                log.warning("flow %s: data-loss check of %s[%d]: %s", self.flow.name, *key, exc)
                continue
            loss = detect_data_loss(expected_offset=state.next_offset, earliest_offset=low, end_offset=end)
            state.suspect_since = None
            self._suspects.pop(key, None)
            if reported:
                self._reassign_needed = True  # the source stopped fetching it: start it again
            if loss is not None:
                events.append(self._on_data_loss(state, loss, now=now, errors=errors))
        for state in self._fetched:
            state.polled = False
        self._fetched.clear()
        return events

    def _end_looks_wrong(self, state: _PartitionState, now: float) -> bool:
        """An idle partition whose fetched watermarks exclude its position, for `gap_confirm_s` now."""
        state.suspect_since = gap_suspected(
            watermarks=None if state.polled else self._source.watermarks(*state.key),
            next_offset=state.next_offset,
            suspect_since=state.suspect_since,
            now=now,
        )
        return state.suspect_since is not None and now - state.suspect_since >= self._gap_confirm_s

    def _on_data_loss(
        self, state: _PartitionState, loss: DataLoss, *, now: float, errors: list[SliceError]
    ) -> GapEvent:
        policy = self.flow.data_loss_policy
        event = gap_event(
            loss,
            topic=state.topic,
            partition=state.partition,
            expected_offset=state.next_offset,
            policy=policy,
            now=now,
        )
        stop = policy == DataLossPolicy.STOP
        self.metrics.record_gap(event, topic=state.remote_topic, source_topic=state.topic, stopped=stop)
        message = loss.describe(state.topic, state.partition)
        self._unreported[state.key] = state
        if stop:
            state.stopped = True
            self._stopped.add(state.key)
            self._record_error(
                SliceError(
                    SliceErrorKind.DATA_LOSS,
                    f"{message}; partition stopped (data.loss.policy=stop)",
                    state.key,
                ),
                state.remote_topic,
                errors,
            )
        else:
            log.warning(
                "flow %s: %s; resuming at offset %d (data.loss.policy=skip)",
                self.flow.name,
                message,
                event.resumed_offset,
            )
            state.next_offset = event.resumed_offset
            self._dirty[state.key] = state
        self._reassign_needed = True
        return event

    def _commit(
        self, *, now: float, errors: list[SliceError], final: bool = False, every_position: bool = False
    ) -> bool:
        """Emit the decided offset syncs, then persist positions: a position never outruns its syncs.

        Positions are the acknowledged prefix of each partition, so this may run with records in flight.
        A moved position is written when `position_record_due` says (at most one record per partition
        per `POSITION_RECORD_INTERVAL_S` while it moves, none while idle), or at once with
        `every_position` (before the partitions may be resumed by someone else). Transactional: the open
        transaction commits first (which delivers everything in flight), so a position or an offset sync
        never covers a record that is not committed. Whether it succeeded.
        """
        if self._in_transaction:
            if not self._commit_transaction(errors):
                return False
            self._collect(now)
            self._transaction_committed(now)
        else:
            self._collect(now)
        dirty = self._dirty
        drained = [(state, state.syncs.drain(now=now, final=final)) for state in dirty.values()]
        syncs = [sync for _, batch in drained for sync in batch]
        if syncs:
            try:
                self._offset_sync_emitter().emit(syncs)
                self.last_offset_sync_at = now
            except Exception as exc:  # the positions wait for the syncs: retried next slice
                for state, batch in drained:
                    state.syncs.requeue(batch)
                self._log_error(
                    SliceError(
                        SliceErrorKind.OFFSET_SYNC, f"emitting {len(syncs)} offset sync(s) failed: {exc}"
                    ),
                    errors,
                )
                return False
        acked = self._acks.records  # before reading the positions: they cover at least these
        changed = {
            key: position
            for key, state in dirty.items()
            if (position := state.position) != state.persisted
            and (
                every_position
                or position_record_due(
                    position=position, written=state.persisted, written_at=state.persisted_at, now=now
                )
            )
        }
        if changed:
            try:
                self._store.save(flow=self.flow.name, positions=changed)
            except Exception as exc:
                self._log_error(
                    SliceError(SliceErrorKind.PERSIST, f"persisting positions failed: {exc}"), errors
                )
                return False
            for key, offset in changed.items():
                dirty[key].persisted, dirty[key].persisted_at = offset, now
            self._known_positions.update(changed)
        # Kept: a position still to write (coalesced) or a progress sync still to come.
        self._dirty = {
            key: state
            for key, state in dirty.items()
            if state.position != state.persisted or not state.syncs.idle
        }
        self._cadence.persisted(now=time.monotonic(), acked=acked)
        return True

    # -- transactions (exactly_once on a transactional sink) --------------------------------------------
    def _serve(self, timeout: float, errors: list[SliceError], *, flush: bool = True) -> None:
        """Serve the sink's delivery reports: flush (wait for every record, up to `timeout`) or one poll.
        A transactional producer raises its fatal errors (fenced) here: the transaction is then failed."""
        try:
            if flush:
                self._sink.flush(timeout)
            else:
                self._sink.poll(timeout)
        except Exception as exc:
            if not self._io.transactional:
                raise
            self._transaction_failed("delivering records", exc, errors)

    def _begin_transaction(self, errors: list[SliceError]) -> bool:
        try:
            self._sink.begin_transaction()  # type: ignore[attr-defined]
        except Exception as exc:
            self._transaction_failed("beginning a transaction", exc, errors)
            return False
        self._in_transaction = True
        return True

    def _commit_transaction(self, errors: list[SliceError]) -> bool:
        """Commit what the open transaction holds; a timeout is retried for up to SLICE_FLUSH_TIMEOUT_S,
        any other failure aborts it (`_transaction_failed`). Whether it committed."""
        sink: TransactionalSink = self._sink  # type: ignore[assignment]
        deadline = time.monotonic() + SLICE_FLUSH_TIMEOUT_S
        while True:
            try:
                sink.commit_transaction(max(deadline - time.monotonic(), 1.0))
            except Exception as exc:
                if (
                    self._io.transaction_failure(exc) == TransactionFailure.RETRY
                    and time.monotonic() < deadline
                ):
                    continue
                self._transaction_failed("committing the transaction", exc, errors)
                return False
            self._in_transaction = False
            return True

    def _transaction_committed(self, now: float) -> None:
        """What the transaction held is replicated now: every partition acknowledged in it (all dirty since
        `_collect`) counts its records, and their replication latency is observed."""
        for state in self._dirty.values():
            state.committed_records, state.committed_bytes = state.acked_records, state.acked_bytes
        uncommitted, self._uncommitted = self._uncommitted, {}
        for key, state in uncommitted.items():
            if self._states.get(key) is state:
                self._observe_latency(state, now)

    def _count_aborted(self, now: float) -> None:
        """Records acknowledged in the transaction that failed, counted apart: never replicated."""
        uncommitted, self._uncommitted = self._uncommitted, {}
        for state in uncommitted.values():
            aborted = state.acked_records - state.committed_records
            if aborted > 0:
                self.metrics.record_aborted(
                    topic=state.remote_topic,
                    partition=state.partition,
                    source_topic=state.topic,
                    records=aborted,
                    now=now,
                )
            state.acked_records, state.acked_bytes = state.committed_records, state.committed_bytes
            state.observed_records = min(state.observed_records, state.committed_records)

    def _transaction_failed(self, doing: str, exc: Exception, errors: list[SliceError]) -> None:
        """Fenced: this task stops for good (another worker runs it). Otherwise the transaction is aborted
        and every running partition restarts from its committed records (next slice, a fresh producer
        whose init_transactions aborts it if the abort here failed): nothing of it is ever persisted."""
        self._collect(self._clock())  # the acknowledgements of what it held (still open), counted apart
        self._in_transaction = False
        self._count_aborted(self._clock())
        running = [key for key, state in self._states.items() if not state.stopped]
        if self._io.transaction_failure(exc) == TransactionFailure.FENCED:
            reason = self._superseded()
            self._stop_fenced(
                SliceError(
                    SliceErrorKind.FENCED if reason is None else SliceErrorKind.SUPERSEDED,
                    f"flow {self.flow.name} task {self.task_index} was fenced on {self.flow.target} while "
                    f"{doing} ({exc}): {reason or 'another worker runs this task now'}; this one stops "
                    "writing, and its uncommitted records are aborted",
                ),
                errors,
            )
            return
        try:
            self._sink.abort_transaction(SLICE_FLUSH_TIMEOUT_S)  # type: ignore[attr-defined]
        except Exception:  # the next producer's init_transactions aborts it
            log.debug(
                "flow %s task %d: abort_transaction failed", self.flow.name, self.task_index, exc_info=True
            )
        for key in running:  # restarted next slice: their records after the last commit are gone
            del self._states[key]
        self._states_changed()
        self._restart_needed = True
        self._log_error(
            SliceError(
                SliceErrorKind.TRANSACTION,
                f"{doing} on {self.flow.target} failed: {exc}; the transaction is aborted and "
                f"{len(running)} partition(s) restart from their committed records",
            ),
            errors,
        )

    def _stop_fenced(self, error: SliceError, errors: list[SliceError]) -> None:
        """Stop for good: nothing more is written (`run_slice` raises `TaskFenced`)."""
        self._fenced = error.message
        self._states = {key: state for key, state in self._states.items() if state.stopped}
        self._assigned = []
        self._states_changed()
        if error.kind is SliceErrorKind.SUPERSEDED:  # the fencing of a new assignment working as designed
            errors.append(error)
            log.warning("flow %s task %d: %s", self.flow.name, self.task_index, error)
        else:
            self._log_error(error, errors)

    def _report_metrics(self, now: float, *, swept: Sequence[TopicPartition] = ()) -> None:
        """The metrics of the partitions that moved, started or failed since the last report, and of the
        `swept` share of the others (an idle partition's source end and consumer position change without
        a record to fetch: transaction markers, a held or stopped partition)."""
        states, transactional, held = self._states, self._io.transactional, self._held
        reported, self._unreported = self._unreported, {}
        reported.update((key, states[key]) for key in swept if key in states)
        reported.update(held)  # a held partition falls behind while nothing of it moves
        for key, state in reported.items():
            if states.get(key) is not state:
                continue
            # Transactional: what the commits included (an aborted transaction's records never count).
            counted, counted_bytes = (
                (state.committed_records, state.committed_bytes)
                if transactional
                else (state.acked_records, state.acked_bytes)
            )
            records = counted - state.reported_records
            if records > 0:
                self.metrics.record_replicated(
                    topic=state.remote_topic,
                    partition=state.partition,
                    source_topic=state.topic,
                    records=records,
                    byte_count=counted_bytes - state.reported_bytes,
                    replication_latency_ms=state.latency_ms,
                    now=now,
                    last_timestamp_ms=state.last_acked.timestamp()[1],
                )
                state.reported_records, state.reported_bytes = counted, counted_bytes
            watermarks = self._source.watermarks(*key)
            self.metrics.record_position(
                topic=state.remote_topic,
                partition=state.partition,
                source_topic=state.topic,
                next_offset=state.position,
                source_end_offset=watermarks[1] if watermarks else None,
                last_fetched_offset=state.next_offset - 1,
                # Held: the consumer fetched past the held record, records it was given and dropped; they
                # are behind, so the position does not discount them (markers past it count: a bound).
                consumer_position=None if key in held else self._source.position(*key),
                skipped=state.skipped - state.reported_skipped,
                now=now,
            )
            state.reported_skipped = state.skipped

    def _log_error(self, error: SliceError, errors: list[SliceError]) -> None:
        errors.append(error)
        log.error("flow %s task %d: %s", self.flow.name, self.task_index, error)

    def _record_error(self, error: SliceError, remote_topic: str, errors: list[SliceError]) -> None:
        """An error about one partition: also its metrics' last error."""
        self._log_error(error, errors)
        topic, partition = error.partition
        self.metrics.record_error(
            topic=remote_topic,
            partition=partition,
            source_topic=topic,
            message=error.message,
            now=self._clock(),
        )


def _close_quietly(client) -> None:
    try:
        client.close()
    except Exception:  # closing is best effort: the task is going away anyway
        log.debug("closing %r failed", client, exc_info=True)
