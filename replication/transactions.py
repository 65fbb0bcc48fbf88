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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from replication.config import FlowConfig
from replication.partition_state import PartitionState
from replication.slices import SliceError, SliceErrorKind
from replication.task_io import TaskIO, TransactionalSink, TransactionFailure
from replication.task_metrics import TaskMetrics
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)


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
    ) -> None:
        self._sink, self._failure, self._timeout_s, self._metrics = sink, failure, timeout_s, metrics
        self._flow, self._task_index = flow, task_index
        self._target, self._label = flow.target, f"flow {flow.name} task {task_index}"
        self._initialised: TransactionalSink | None = None  # the sink `initialise` last readied
        self.ready_to_retry = True  # `initialise` failed in a way the same sink may try again
        self.open = False
        self.uncommitted: dict[TopicPartition, PartitionState] = {}

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
        )

    @property
    def ready(self) -> bool:
        """`initialise` ran on the current sink (a fresh producer initialises its transactions first)."""
        return self._initialised is not None and self._initialised is self._sink()

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
        """The open transaction is abandoned: what it held is counted apart (`rolled_back`). Fenced, the
        error stops the task for good (`FENCED`, or `SUPERSEDED` when its assignment is not the flow's
        any more). Otherwise the transaction is aborted (if that fails, the next producer's `init` aborts
        it) and the `TRANSACTION` error restarts the task's `running` partitions from what is committed."""
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
