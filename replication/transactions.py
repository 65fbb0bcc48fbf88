"""exactly_once in Kafka transactions (`TaskIO.transactional`): one task's transactions on its
`TransactionalSink`, and what they mean for its counters.

`init` fences every earlier producer of the task (a zombie) and aborts what it or a crash left open, once
per sink, before the committed tails are read. A transaction is open from a fetch that brought records to
the next commit; a commit that times out is retried for up to `timeout_s`, any other failure is a
`TransactionFailed` whose `failure` says what it means (`TransactionFailure`: abort and restart the
partitions from what is committed, or fenced: stop for good). Records count as replicated once a commit
included them (`committed`, which places the records sent after each partition's last delivery report);
the records of an aborted transaction are rolled back from the counters and returned, to be counted
apart (`rolled_back`).

How long a transaction runs (`TransactionSpan`): as long as the persist cadence, as before, unless the
task's partitions still hold a backlog in the source at least as large as what it holds (every running
partition's, `replication.progress.Backlog`); then its bounds double, up to
`MAX_SPAN_SCALE` times the cadence's and `MAX_TRANSACTION_BYTES`. Each commit flushes the producer (the
pipeline drains to nothing and fills again) and costs a round trip to the coordinator: a quarter of the
task's time at 10 KB while catching up at one commit per 0.2 s (issue 38). Caught up, nothing waits
behind the transaction and it commits at the cadence, so what `read_committed` readers wait is unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from replication.config import FlowConfig
from replication.partition_state import Acknowledgements, PartitionState
from replication.positions import PERSIST_INTERVAL_S, PERSIST_RECORDS
from replication.slices import SliceError, SliceErrorKind
from replication.task_io import TaskIO, TransactionalSink, TransactionFailure
from replication.task_metrics import TaskMetrics
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

# A transaction with a backlog behind it runs up to this many times the persist cadence (3.2 s, 160,000
# records), far below `transaction.timeout.ms` (120 s), and holds this many bytes at most (3.2 s at
# 320 MB/s: the time bound comes first unless the target takes more): what an abort makes the task copy
# again, and what `read_committed` readers of the target wait for, while the records behind it wait
# longer anyway.
MAX_SPAN_SCALE = 16
MAX_TRANSACTION_BYTES = 1024 * 1024 * 1024


class TransactionSpan:
    """How long the open transaction runs (pure: what it holds and its age are passed in).

    It commits when the persist cadence is due (`interval_s`, `records`: the at_least_once persist
    cadence) unless the task's running partitions hold at least as many records in the source as it
    holds itself (a backlog that takes another span of this size to copy), and at least `records`: then
    its bounds double, and the backlog is asked again when it reaches them, up to `max_scale` times the
    cadence's and `max_bytes`. A transaction of a task that is caught up, or less than a cadence's
    records behind (a stream that a slow moment held up: 0.5 s of 20,000 records/s), commits at the
    cadence, so what `read_committed` readers wait is unchanged there; one that catches up grows no more
    and commits at its next bound. The backlog is asked only at those bounds (a few times a
    transaction), not at every fetch. A transaction with nothing acknowledged yet (the cadence came due
    just after the fetch that began it) goes on without asking, up to the longest span: committing it
    would only wait for its records in flight and end a transaction that has barely begun."""

    def __init__(self, *, interval_s: float, records: int, max_scale: int, max_bytes: int) -> None:
        self.interval_s, self.records, self.max_scale, self.max_bytes = (
            interval_s,
            records,
            max_scale,
            max_bytes,
        )
        self.scale = 1  # the bounds of the open transaction, in persist cadences

    def goes_on(self, *, age_s: float, records: int, bytes_: int, behind: Callable[[int], bool]) -> bool:
        """The persist cadence is due: whether the open transaction, `age_s` old and holding `records`
        records of `bytes_` bytes, goes on (`behind(n)`: at least `n` records wait in the source)."""
        scale = self.scale
        if bytes_ >= self.max_bytes:
            return False
        if records == 0:  # nothing acknowledged yet: a commit now would only wait for what is in flight
            return age_s < self.interval_s * self.max_scale
        if scale > 1 and age_s < self.interval_s * scale and records < self.records * scale:
            return True  # within bounds it grew to
        if scale >= self.max_scale or not behind(max(records, self.records)):
            return False
        self.scale = scale * 2
        return True

    def reset(self) -> None:
        """The transaction ended: the next one starts at the cadence."""
        self.scale = 1


class TransactionFailed(Exception):
    """A transactional call failed: `failure` says what the task does about it."""

    def __init__(self, doing: str, cause: Exception, failure: TransactionFailure) -> None:
        super().__init__(f"{doing}: {cause}")
        self.doing, self.cause, self.failure = doing, cause, failure


class Transactions:
    """The transaction state of one task: whether `init` ran on the current sink, whether a transaction
    is open, and the partitions acknowledged in it (their latency is observed once it commits)."""

    def __init__(
        self,
        *,
        sink: Callable[[], TransactionalSink],
        failure: Callable[[Exception], TransactionFailure],
        timeout_s: float,
        metrics: TaskMetrics,
        flow: FlowConfig,
        task_index: int,
        acks: Acknowledgements,
        clock: Callable[[], float],
    ) -> None:
        """`acks`: the task's acknowledgements, which measure what the open transaction holds; `clock`:
        the task's, which measures its age."""
        self._sink, self._failure, self._timeout_s, self._metrics = sink, failure, timeout_s, metrics
        self._clock = clock
        self._acks = acks
        self._flow, self._task_index = flow, task_index
        self._target, self._label = flow.target, f"flow {flow.name} task {task_index}"
        self._initialised: TransactionalSink | None = None  # the sink `initialise` last readied
        self.ready_to_retry = True  # `initialise` failed in a way the same sink may try again
        self.open = False
        self.uncommitted: dict[TopicPartition, PartitionState] = {}
        self.span = TransactionSpan(
            interval_s=PERSIST_INTERVAL_S,
            records=PERSIST_RECORDS,
            max_scale=MAX_SPAN_SCALE,
            max_bytes=MAX_TRANSACTION_BYTES,
        )
        self._begun = (0.0, 0, 0)  # when the open transaction began, and the acknowledgements' totals then

    @classmethod
    def of(
        cls,
        io: TaskIO,
        *,
        sink: Callable[[], TransactionalSink],
        timeout_s: float,
        metrics: TaskMetrics,
        flow: FlowConfig,
        task_index: int,
        acks: Acknowledgements,
        clock: Callable[[], float],
    ) -> Transactions | None:
        """The transactions of a task whose sink is transactional (`TaskIO.transactional`), else None."""
        if not io.transactional or io.transaction_failure is None:
            return None
        return cls(
            sink=sink,
            failure=io.transaction_failure,
            timeout_s=timeout_s,
            metrics=metrics,
            flow=flow,
            task_index=task_index,
            acks=acks,
            clock=clock,
        )

    @property
    def ready(self) -> bool:
        """`initialise` ran on the current sink (a fresh producer initialises its transactions first)."""
        return self._initialised is not None and self._initialised is self._sink()

    def fatal(self, exc: Exception) -> bool:
        """Whether the sink failed fatally without saying why (its error report does)."""
        return self._failure(exc) is TransactionFailure.FATAL

    def failed(self, doing: str, exc: Exception) -> TransactionFailed:
        """What an exception of the sink (its fatal errors come from `poll` and `flush` too) means."""
        return TransactionFailed(doing, exc, self._failure(exc))

    def initialise(self, *, superseded: Callable[[], str | None]) -> SliceError | None:
        """Fence every earlier producer of this task (a zombie) and abort what it or a crash left open;
        once per sink, before the committed tails are read. None once ready; a `SUPERSEDED` error when
        the task's assignment is not the flow's any more (asked before, and after for a fencing begun
        meanwhile: a superseded task never writes); else a `START` error (retried next slice, on a new
        sink unless `ready_to_retry`)."""
        reason = superseded()
        if reason is None:
            try:
                self._sink().init_transactions(self._timeout_s)
            except Exception as exc:
                self.ready_to_retry = self._failure(exc) == TransactionFailure.RETRY
                flow = self._flow.name
                return SliceError(
                    SliceErrorKind.START,
                    f"cannot start: initialising the transactions of {flow} task {self._task_index} on "
                    f"{self._target} failed: {exc} (the target principal needs WRITE and DESCRIBE on "
                    f"TransactionalId mirrorplane-*; or set {flow}.exactly.once.transactions = false)",
                )
            reason = superseded()  # a fencing begun meanwhile
        if reason is not None:
            return SliceError(
                SliceErrorKind.SUPERSEDED, f"{self._label} stops while initialising transactions: {reason}"
            )
        self._initialised = self._sink()
        return None

    def begin(self) -> None:
        try:
            self._sink().begin_transaction()
        except Exception as exc:
            raise self.failed("beginning a transaction", exc) from exc
        self.open = True
        self.span.reset()
        self._begun = (self._clock(), self._acks.records, self._acks.bytes)

    def goes_on(self, behind: Callable[[int], bool]) -> bool:
        """The persist cadence is due: whether the open transaction goes on instead of committing now
        (`TransactionSpan`; `behind(n)`: at least `n` records wait in the source)."""
        begun_at, records, bytes_ = self._begun
        return self.span.goes_on(
            age_s=self._clock() - begun_at,
            records=self._acks.records - records,
            bytes_=self._acks.bytes - bytes_,
            behind=behind,
        )

    def commit(self) -> None:
        """Commit what the open transaction holds; a timeout is retried for up to `timeout_s`."""
        deadline = time.monotonic() + self._timeout_s
        sink = self._sink()
        while True:
            try:
                sink.commit_transaction(max(deadline - time.monotonic(), 1.0))
            except Exception as exc:
                failure = self._failure(exc)
                if failure == TransactionFailure.RETRY and time.monotonic() < deadline:
                    continue
                raise TransactionFailed("committing the transaction", exc, failure) from exc
            self.open = False
            return

    def fail(
        self, failed: TransactionFailed, *, superseded: str | None, running: int, now: float
    ) -> SliceError:
        """The open transaction is abandoned: what it held is counted apart (`rolled_back`). Fenced, or
        `superseded` (its assignment is not the flow's any more), the error stops the task for good
        (`FENCED`, or `SUPERSEDED`: the hand-over to the new assignment, whatever the broker answered the
        old one's call; Kafka's coordinator may answer an EndTxn racing the new producer's InitProducerId
        with an unknown server error instead of fencing it). Otherwise the `TRANSACTION` error restarts the
        task's `running` partitions from what is committed. Unless fenced, the transaction is aborted (if
        that fails, the next producer's `init` aborts it)."""
        for state, aborted in self.rolled_back():
            if aborted > 0:
                self._metrics.aborted(state, aborted, now)
        if failed.failure == TransactionFailure.FENCED:
            return SliceError(
                SliceErrorKind.FENCED if superseded is None else SliceErrorKind.SUPERSEDED,
                f"{self._label} was fenced on {self._target} while {failed.doing} ({failed.cause}): "
                f"{superseded or 'another worker runs this task now'}; this one stops writing, and its "
                "uncommitted records are aborted",
            )
        try:
            self._sink().abort_transaction(self._timeout_s)
        except Exception:
            log.debug("%s: abort_transaction failed", self._label, exc_info=True)
        if superseded is not None:
            return SliceError(
                SliceErrorKind.SUPERSEDED,
                f"{self._label} stops on {self._target}: {superseded}; {failed.doing} failed meanwhile "
                f"({failed.cause}), its transaction is aborted and the new assignment writes its records "
                "from the committed positions",
            )
        return SliceError(
            SliceErrorKind.TRANSACTION,
            f"{failed.doing} on {self._target} failed: {failed.cause}; the transaction is aborted and "
            f"{running} partition(s) restart from their committed records",
        )

    def acknowledged(self, state: PartitionState) -> bool:
        """A partition heard acknowledgements: kept for the next `committed`, even when no transaction is
        open any more (reports served by a commit belong to the transaction it just committed, whose
        records after them it places); whether a transaction is open."""
        self.uncommitted[state.key] = state
        return self.open

    def committed(self, acknowledged: Iterable[PartitionState]) -> dict[TopicPartition, PartitionState]:
        """The open transaction committed: every record it sent was delivered (its partitions asked for
        one report per run: `PartitionState.deliver_committed`), and what the `acknowledged` partitions
        hold counts as replicated. The partitions acknowledged in it, whose replication latency is
        observed now."""
        uncommitted, self.uncommitted = self.uncommitted, {}
        for state in uncommitted.values():
            state.deliver_committed()
        for state in acknowledged:
            state.committed_records, state.committed_bytes = state.acked_records, state.acked_bytes
        return uncommitted

    def rolled_back(self) -> list[tuple[PartitionState, int]]:
        """The transaction is abandoned: each partition acknowledged in it goes back to its committed
        counts; the records of it that were acknowledged, per partition (never replicated)."""
        self.open = False
        uncommitted, self.uncommitted = self.uncommitted, {}
        aborted = []
        for state in uncommitted.values():
            aborted.append((state, state.acked_records - state.committed_records))
            state.acked_records, state.acked_bytes = state.committed_records, state.committed_bytes
            state.observed_records = min(state.observed_records, state.committed_records)
        return aborted
