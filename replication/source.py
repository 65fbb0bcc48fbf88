"""`MirrorSourceTask`: copies its source partitions to the remote topics, MirrorMaker 2's way, in slices.

Each source partition is consumed by `assign()` and produced to the remote topic
(`policy.format_remote_topic`) on the same partition number with its key, value, every header in order
and its timestamp, by an idempotent producer, in order. A slice is bounded in records and time; it
ends with the offset syncs sent and the positions (next source offset per partition) that acknowledged
syncs cover persisted (a settling slice flushes the producer and waits for the syncs first): a position
never covers a record the target did not acknowledge, nor a record whose offset sync is not durable. During a slice the same commit runs at
least every `PERSIST_INTERVAL_S` / `PERSIST_RECORDS` (exactly_once in transactions: a transaction with a
backlog behind it goes on longer, across slice ends, `replication.transactions.TransactionSpan`), and at
most `MAX_IN_FLIGHT` records are unacknowledged, which bounds what a crash leaves in doubt.

Split as Kafka Connect splits a source task: this module orchestrates (assignment, the fetch loop, slice
ends, fencing); collaborators of one job each drive the Protocols of `replication.task_io`: `delivery`
and `partition_state` (producing, acknowledgements), `transactions`, `schema_hold`, `positions`
(`PositionWriter`: offset syncs, then positions), `task_metrics`, `progress`, `starting`, `data_loss`.
The MM2 decisions are the pure functions of `replication.mirroring` and `replication.offset_syncs`.
What a failure does to the task (a delivery failed, a transaction failed or fenced, the assignment
superseded) is its base's, `replication.source_failures.TaskFailures`.

Delivery (docs/delivery-guarantees.md has the exact guarantee and its limits):

* `at_least_once`: a restart resumes from the stored position; records acknowledged after the last
  stored position are written again (duplicates, never loss).
* `exactly_once`: mirrored records carry `mirrorplane.source-offset` (8-byte big-endian source offset;
  in transactions on each run's first and last record only, `replication.delivery`) and the producer is
  transactional or gapless, so the remote partition always holds a prefix of what was sent,
  and a partition resumes right after the last source offset found there (`replication.starting`).
  Assumes one writer per remote partition (the task assignment gives each partition to one task).

Data loss (`replication.data_loss`): the partition stops (`data.loss.policy=stop`, the others go on) or
resumes at the earliest offset (`skip`); the consumer never resets an offset itself. Memory is bounded:
a consumed batch is at most `CONSUME_BATCH` records, and while the producer queue is full
(`BufferError`) the task serves acknowledgements instead of consuming more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import cast

from replication import slices
from replication.config import DeliveryGuarantee, FlowConfig
from replication.data_loss import GAP_CONFIRM_S, DataLossCheck
from replication.delivery import Delivery, ProduceFailed
from replication.fetch_stall import FetchStalls
from replication.fetching import fetch_plan
from replication.metrics import MirrorMetrics
from replication.mirroring import header_rewriter
from replication.partition_state import PartitionState, keep_only
from replication.policy import ReplicationPolicy
from replication.positions import PositionStore, PositionWriter
from replication.progress import Progress
from replication.schema_hold import SCHEMA_WAIT_ERROR_S, SchemaHold
from replication.slices import (
    FENCED_KINDS,
    STOPPING_KINDS,
    SliceError,
    SliceErrorKind,
    SliceResult,
    TaskFenced,
)
from replication.source_failures import TaskFailures
from replication.starting import REMOTE_PARTITION_WAIT_S, PartitionStarter
from replication.task_io import (
    Readers,
    SchemaRewriter,
    SourceRecord,
    TaskIO,
    TransactionalSink,
    close_quietly,
)
from replication.task_metrics import Rotation, TaskMetrics
from replication.topic_partition import TopicPartition
from replication.transactions import TransactionFailed, Transactions

__all__ = ["MirrorSourceTask", "SliceError", "SliceErrorKind", "SliceResult", "TaskFenced"]  # slices' too

log = logging.getLogger(__name__)

# A slice waits this long at most for acknowledgements; what is still unacknowledged stays in flight
# and the position stays before it.
SLICE_FLUSH_TIMEOUT_S = 30.0
# Records produced and not yet acknowledged at most: what a crash leaves in doubt besides what was
# acknowledged since the last persist (a full producer queue would be 100,000 records in doubt).
MAX_IN_FLIGHT = 10_000


class MirrorSourceTask(TaskFailures):
    """A source task: assigns, starts and stops partitions, runs the fetch loop and the slice ends, and
    stops for good once fenced; its collaborators produce, transact, hold, write positions and report."""

    def __init__(
        self,
        *,
        flow: FlowConfig,
        policy: ReplicationPolicy,
        task_index: int,
        position_store: PositionStore,
        io: TaskIO,
        metrics: MirrorMetrics | None = None,
        clock: Callable[[], float] = time.time,
        gap_confirm_s: float = GAP_CONFIRM_S,
        remote_partition_wait_s: float = REMOTE_PARTITION_WAIT_S,
        schema_ids: SchemaRewriter | None = None,
        schema_wait_error_s: float = SCHEMA_WAIT_ERROR_S,
        superseded: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`io` reaches the clusters (Kafka's: `replication.kafka.source_io.kafka_task_io`).
        `schema_ids` rewrites the schema IDs of keys and values (`rewrite-ids`); a partition held for a
        schema this long is a `schema` error (`schema_wait_error_s`). `superseded`: why this
        task's assignment is no longer the flow's (`replication.generations`), None while it is; asked
        before and after `init_transactions` (a superseded task never writes) and when it is fenced."""
        self.flow, self.policy = flow, policy
        self.task_index = task_index
        self.metrics = metrics if metrics is not None else MirrorMetrics(clock=clock)
        self._label = label = f"flow {flow.name} task {task_index}"
        self._clock = clock
        self._superseded = superseded
        self._exactly_once = flow.delivery_guarantee == DeliveryGuarantee.EXACTLY_ONCE
        self._io = io
        self._source = io.source
        self._readers = readers = Readers(io)
        self._hold = SchemaHold(clock=clock, label=label, error_after_s=schema_wait_error_s)
        self._stalls = FetchStalls(
            source=self._source,
            label=label,
            on_stall=lambda state, stalled, now: self._reporter.stall(state, stalled=stalled, now=now),
        )
        rewrite = header_rewriter(
            provenance_enabled=flow.provenance_header_enabled,
            exactly_once=self._exactly_once,
            source_alias=flow.source,
            target_alias=flow.target,
        )
        self._delivery = Delivery(io=io, rewrite=rewrite, schema_ids=schema_ids, hold=self._hold, label=label)
        self._acks = acks = self._delivery.acks
        self._positions = positions = PositionWriter(
            flow=flow.name, store=position_store, offset_syncs=io.offset_syncs, acks=acks
        )
        self._reporter = reporter = TaskMetrics(
            metrics=self.metrics, source=io.source, transactional=io.transactional
        )
        # exactly_once on a transactional sink (`TaskIO.transactional`); None otherwise.
        self._transactions = Transactions.of(
            io,
            sink=lambda: cast(TransactionalSink, self._delivery.sink),
            timeout_s=SLICE_FLUSH_TIMEOUT_S,
            metrics=reporter,
            flow=flow,
            task_index=task_index,
            acks=acks,
            clock=clock,
        )
        self._progress = Progress(
            acks=acks,
            positions=positions,
            metrics=reporter,
            transactions=self._transactions,
            source=io.source,
        )
        self._data_loss = DataLossCheck(
            source=io.source,
            reader=readers.source,
            policy=flow.data_loss_policy,
            metrics=reporter,
            positions=positions,
            gap_confirm_s=gap_confirm_s,
            label=label,
        )
        self._starter = PartitionStarter(
            flow=flow,
            positions=positions,
            acks=acks,
            readers=readers,
            wait_s=remote_partition_wait_s,
            clock=clock,
            label=label,
        )
        self._given: tuple[TopicPartition, ...] | None = None  # as `assign` last got them
        self._assigned: list[TopicPartition] = []
        self._assignment_changed = False  # or some assigned partition has not started yet
        self._states: dict[TopicPartition, PartitionState] = {}
        self._stopped: set[TopicPartition] = set()
        self._rotation = Rotation()
        self._restart_needed = False  # a delivery failed: restart every partition from its position
        self._restart_keys: set[TopicPartition] = set()  # a record refused or late: restart these alone
        self._resume: dict[TopicPartition, int] = {}  # restarted alone, not started yet: from there
        self._reassign_needed = False
        self._fetching: dict[TopicPartition, PartitionState] = {}  # the states the source last fetched for
        self._closed = False
        self._fenced: str | None = None  # why this task stopped for good (it then writes nothing)

    # -- public API ---------------------------------------------------------------------------------
    @property
    def fenced(self) -> bool:
        """It stopped for good (fenced, or its assignment superseded): it never writes again."""
        return self._fenced is not None

    @property
    def last_offset_sync_at(self) -> float | None:
        """When offset syncs were last acknowledged (clock)."""
        return self._positions.last_offset_sync_at

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
        settle_until: threading.Event | None = None,
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
        run out: another thread may stop a slice it started (`workers.bridge`). `settle_until` makes the
        settle give up once set: what is in flight stays so, uncommitted, for the task's next slice.
        """
        if self._closed:
            raise RuntimeError("run_slice on a closed MirrorSourceTask")
        deadline = time.monotonic() + max_seconds
        errors: list[SliceError] = []
        if self._fenced is not None:  # a zombie: another producer of this task writes now
            raise TaskFenced(self._fenced)
        self._apply_assignment(errors)
        self._hold.retry()
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
                if self._transactions is None:
                    raise
                self._transaction_failed(self._transactions.failed("replicating", exc), errors)
                caught_up = False
        else:  # nothing to replicate: a slice still takes its time (no spinning)
            (interrupt or threading.Event()).wait(max(deadline - time.monotonic(), 0.0))
        self._serve(SLICE_FLUSH_TIMEOUT_S if settle else 0.0, errors, flush=settle, until=settle_until)
        now = self._clock()
        self._progress.observe(self._states, now)
        self._check_deliveries(errors)
        swept = self._rotation.take(now=now)
        self._stalls.check(
            self._states,
            fetched=self._progress.fetched,
            caught_up=caught_up,
            in_flight=len(self._delivery.sink),
            now=now,
        )
        gaps, stopped = self._data_loss.check(
            self._states, fetched=self._progress.fetched, swept=swept, now=now
        )
        self._stopped.update(self._progress.stopped(self._states, (error.partition for error in stopped)))
        for error in (*stopped, *self._hold.check(now=now)):
            self._record_error(error, errors)
        # Settled: the next slice may run elsewhere, so every moved position is written now. A transaction
        # with a backlog behind it goes on across the slice end (`Transactions.goes_on`).
        gave_up = settle_until is not None and settle_until.is_set()
        if not gave_up and (settle or caught_up or not self._transaction_goes_on()):
            self._commit(now=now, errors=errors, every_position=settle)
        self._reporter.report(self._states, held=self._hold.held, now=now, swept=swept)
        if self._reseek_needed and not self._restart_needed:
            self._assign_source()
        slices.log_rest(log, self._label, errors)
        return SliceResult(
            records=self._acks.records - records_before,
            bytes=self._acks.bytes - bytes_before,
            positions=dict(self._positions.known),
            stopped_partitions=tuple(sorted(self._stopped)),
            gap_events=tuple(gaps),
            errors=tuple(errors),
            caught_up=caught_up,
        )

    def prepare(self) -> None:
        """Open now what the first slices would open while replicating (the offset-syncs topic and its
        writer), so that a task taking partitions over from a stopping worker does it before it holds
        them, not while their records wait (`workers.replication`)."""
        self._positions.emitter().prepare()

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
            close_quietly(self._source, self._positions.opened_emitter, *self._readers.opened)
        if errors:
            fenced = all(error.kind in FENCED_KINDS for error in errors)
            (log.warning if fenced else log.error)(
                "%s closed with errors: %s", self._label, list(map(str, errors))
            )

    def _after_flush(self, errors: list[SliceError], *, final: bool = False) -> None:
        """After every record settled (before partitions move, restart or close): every moved position
        is written, so whoever resumes them redoes nothing."""
        now = self._clock()
        self._progress.observe(self._states, now)
        self._check_deliveries(errors)
        self._commit(now=now, errors=errors, final=final, every_position=True)
        self._reporter.report(self._states, held=self._hold.held, now=now)

    # -- starting and stopping partitions -----------------------------------------------------------
    def _apply_assignment(self, errors: list[SliceError]) -> None:
        if not (
            self._assignment_changed or self._restart_needed or self._reseek_needed or self._restart_keys
        ):
            return
        assigned = set(self._assigned)
        removed = [key for key in self._states if key not in assigned]
        if self._restart_needed or removed or (self._restart_keys and self._exactly_once):
            # Every record settled (acknowledged or failed) and committed before partitions go or
            # restart, so no old delivery report can interleave with a restarted partition's records
            # (exactly_once: its start reads the remote partition's tail, which must hold them).
            self._serve(self._io.settle_timeout_s, errors)
            self._after_flush(errors, final=bool(removed))
        for key in removed:  # another task may advance it meanwhile: ask the store again if it returns
            self._positions.forget(key)
            self._resume.pop(key, None)
        self._starter.keep_awaiting(assigned)
        before = set(self._states)
        if self._restart_needed:
            self._delivery.replace_sink()
            self._states = {key: state for key, state in self._states.items() if state.stopped}
            self._restart_needed = False
            self._restart_keys, self._resume = set(), {}
            self._reassign_needed = True  # the source must fetch again from the restarted positions
        elif self._restart_keys:
            self._restart_alone(errors)
        self._states = {key: state for key, state in self._states.items() if key in assigned}
        to_start = [key for key in self._assigned if key not in self._states]
        if to_start:
            self._start_partitions(to_start, errors)
        self._assignment_changed = len(self._states) < len(assigned)  # retried next slice
        if set(self._states) != before or self._reseek_needed:
            self._states_changed()
            self._assign_source()

    def _states_changed(self) -> None:
        """The set of partition states changed: what is kept about them follows (once per change)."""
        states = self._states
        self._stopped = {key for key, state in states.items() if state.stopped}
        keep_only(
            states,
            self._positions.dirty,
            self._reporter.unreported,
            self._progress.unconfirmed,
            self._hold.held,
            self._data_loss.suspects,
            self._acks.failed,
            self._transactions.uncommitted if self._transactions is not None else {},
        )
        self._progress.backlog.keep_only(states)
        self._stalls.keep_only(states, now=self._clock())
        self._rotation.reset(list(states))

    def _restart_alone(self, errors: list[SliceError]) -> None:
        """The partitions of `_restart_keys` that start again now, alone, on the same sink, each from its
        failed record (kept in `_resume` until it started), their states dropped; the others go on. At
        at_least_once a partition restarts once nothing sent before its failed record is in flight
        (`PartitionState.restartable`: the reports there are served first, without waiting), and waits
        for that otherwise, retried each slice; the other partitions' records in flight are not waited
        for. At 5,000 partitions, flushing every record of the task before each such restart held the
        whole task for up to `settle_timeout_s` while a target still creating partitions acknowledged
        slowly. exactly_once flushed first (`_apply_assignment`: its start reads the remote tail)."""
        states = self._states
        keys = {key for key in self._restart_keys if key in states and not states[key].stopped}
        if not self._exactly_once:
            self._serve(0.0, errors, flush=False)
        restart = keys if self._exactly_once else {key for key in keys if states[key].restartable}
        self._restart_keys = keys - restart
        if restart:
            self._states = {key: state for key, state in states.items() if key not in restart}
            self._reassign_needed = True
            self._resume.update({key: states[key].position for key in restart})

    def _start_partitions(self, keys: list[TopicPartition], errors: list[SliceError]) -> None:
        """Start these partitions together (`PartitionStarter`), once the transactions are initialised;
        those restarted alone from their failed record (`_resume`), the others from their stored positions."""
        remote_topics = {key: self.policy.format_remote_topic(self.flow.source, key[0]) for key in keys}
        states, failures = self._starter.from_positions(remote_topics, self._resume)
        if states and not self._init_transactions({key: remote_topics[key] for key in states}, errors):
            return
        if self._exactly_once:
            failures.update(self._starter.from_target(states, remote_topics))
        for key, exc in failures.items():  # retried next slice
            states.pop(key, None)
            self._record_error(
                SliceError(SliceErrorKind.START, f"cannot start: {exc}", key), errors, remote_topics[key]
            )
        self._starter.defer(states, self._delivery.warm(states), remote_topics)
        self._starter.started(states)
        for key, state in states.items():
            self._states[key] = state
            self._progress.started(state)
            self._resume.pop(key, None)

    @property
    def _reseek_needed(self) -> bool:
        return self._reassign_needed or bool(
            self._hold.reseek or self._data_loss.reseek or self._stalls.reseek
        )

    def _assign_source(self) -> None:
        """The source fetches the running partitions: those started (or started again) since it last
        fetched and those the collaborators asked to fetch anew (held, out of range, resumed after a gap)
        from their next offsets; the others go on where their fetching is (`RecordSource.assign`)."""
        running = {key: state for key, state in self._states.items() if not state.stopped}
        again = {
            *self._hold.reseek,
            *self._data_loss.reseek,
            *self._stalls.reseek,
            *(key for key, state in running.items() if self._fetching.get(key) is not state),
        }
        self._reassign_needed = False
        self._hold.reseek, self._data_loss.reseek, self._stalls.reseek = set(), set(), set()
        self._source.assign({key: state.next_offset for key, state in running.items()}, again=again)
        self._fetching = running

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
        """Fetch and send (`Delivery.send`) until the deadline or `max_records`; whether it ended caught up."""
        fetch = self._source.fetch
        delivery = self._delivery
        sink = delivery.sink
        poll = delivery.poll
        states = self._states
        polled = self._progress.polled_now
        transactions = self._transactions

        def on_fetch_error(message: SourceRecord) -> None:
            error = self._data_loss.fetch_error(message, states)
            if error is not None:
                self._record_error(error, errors)

        def wait_for_room() -> bool:
            """The sink is full in the middle of a batch. A transaction never commits there: what the
            batch sends next would be outside it, and the run it cut would end on a record without its
            source offset (`Delivery`); the pump commits between batches."""
            if transactions is not None:
                return not (self._restart_needed or self._fenced)
            return self._persist_if_due(errors)

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
            if messages and transactions is not None and not transactions.open:
                try:
                    transactions.begin()
                except TransactionFailed as failed:
                    self._transaction_failed(failed, errors)
                    return False
            try:
                sent = delivery.send(
                    messages,
                    states=states,
                    polled=polled,
                    on_fetch_error=on_fetch_error,
                    wait_for_room=wait_for_room,
                )
            except ProduceFailed as failed:
                if self._transaction_failed_fatally(failed, errors):
                    return False
                self._record_error(failed.slice_error(), errors)
                self._restart_needed = True
                return False
            if not sent:
                return False
            poll(0)
            if messages:
                self._progress.observe(states, self._clock())
            elif (
                return_when_caught_up
                and not len(sink)
                and self._progress.fetched_to_end()
                and (self._positions.persisted_all() or self._positions.due())
            ):
                # Caught up. A stream that merely paused for a moment goes on until its positions are due
                # anyway: each slice end persists, which blocks this loop for a round trip.
                return True
            if not self._persist_if_due(errors):
                return False
        return False

    def _persist_if_due(self, errors: list[SliceError]) -> bool:
        """Persist mid-slice on the cadence; a failure is logged and retried, the slice end reports it.
        False when the pump must stop: a transaction was abandoned (its partitions restart) or fenced,
        which goes to `errors` at once (the slice end does not see it again)."""
        if self._positions.due() and not self._transaction_goes_on():
            failed: list[SliceError] = []
            if not self._commit(now=self._clock(), errors=failed):
                self._positions.postpone()
            errors.extend(e for e in failed if e.kind in STOPPING_KINDS)
        return not (self._restart_needed or self._fenced)

    def _transaction_goes_on(self) -> bool:
        """The open transaction does not commit yet: the source holds a backlog behind it
        (`Transactions.goes_on`); nothing is persisted meanwhile (a position or an offset sync never
        covers a record that is not committed)."""
        transactions = self._transactions
        return transactions is not None and transactions.open and transactions.goes_on(self._progress.behind)

    # -- after the loop -----------------------------------------------------------------------------
    def _commit(
        self, *, now: float, errors: list[SliceError], final: bool = False, every_position: bool = False
    ) -> bool:
        """Emit the decided offset syncs, then persist positions (`PositionWriter.write`). Transactional:
        the open transaction commits first (which delivers everything in flight), so a position or an
        offset sync never covers a record that is not committed. Whether it succeeded."""
        transactions = self._transactions
        if transactions is not None and transactions.open:
            try:
                transactions.commit()
            except TransactionFailed as failed:
                self._transaction_failed(failed, errors)
                return False
            self._progress.committed(self._states, now)
        else:
            self._progress.collect(self._states, now)
        error = self._positions.write(now=now, final=final, every_position=every_position)
        if error is not None:
            self._log_error(error, errors)
        return error is None
