"""`TaskFailures`: what a failure does to a source task (`replication.source.MirrorSourceTask`, which it is
a base of, as Connect's `ExactlyOnceWorkerSourceTask` adds its transactional paths to the loop of
`AbstractWorkerSourceTask`).

* A delivery that failed (a record not acknowledged, or a refusal of the producer itself): the partition's
  error, and every running partition restarts from its position next slice on a new sink
  (`_restart_needed`).
* A record refused for itself or its partition (too large for the target, its remote topic unknown to the
  producer: `TaskIO.refusal_partition_only`), a delivery that failed because the target did not know its
  remote partition, or a batch report that came too late to vouch for the records before it
  (`Delivery.restart_alone`): the partition's errors, and it alone restarts from that record, on the same
  sink (`_restart_keys`), once nothing sent before that record is in flight; the others go on, and their
  records in flight are not waited for (at exactly_once they are: its start reads the remote tail). At
  5,000 partitions a restart of every partition took seconds and its consumer fetched all of them again,
  a record too large for the target restarted them all every slice, and waiting for every record in
  flight before one partition restarted held the task up to `settle_timeout_s`.
* A transaction that failed: every running partition restarts from its committed records, on a fresh
  producer; nothing of the transaction is ever persisted.
* Fenced (another producer of this task's transactional ID runs now), or the assignment superseded
  (`replication.generations`): the task stops for good and never writes again (`TaskFenced`). A fenced
  producer's bare "Local: Fatal error" on produce is served first, so the task fails as the fencing,
  not as a partition's produce error.

The state these paths change is the task's own (declared below, set by `MirrorSourceTask.__init__`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping

from replication import slices
from replication.delivery import Delivery, ProduceFailed
from replication.partition_state import PartitionState
from replication.progress import Progress
from replication.slices import SliceError, SliceErrorKind
from replication.task_io import TransactionFailure
from replication.task_metrics import TaskMetrics
from replication.topic_partition import TopicPartition
from replication.transactions import TransactionFailed, Transactions

log = logging.getLogger("replication.source")  # the task's logger: its lines keep their name


class TaskFailures:
    """The failure paths of a source task (a base of `MirrorSourceTask`)."""

    _label: str
    _clock: Callable[[], float]
    _superseded: Callable[[], str | None]
    _delivery: Delivery
    _transactions: Transactions | None
    _progress: Progress
    _reporter: TaskMetrics
    _states: dict[TopicPartition, PartitionState]
    _assigned: list[TopicPartition]
    _restart_needed: bool
    _restart_keys: set[TopicPartition]
    _fenced: str | None

    def _states_changed(self) -> None:
        """The set of partition states changed (the task keeps what it holds about them in step)."""
        raise NotImplementedError

    def _init_transactions(self, starting: Mapping[TopicPartition, str], errors: list[SliceError]) -> bool:
        """Transactional: fence every earlier producer of this task before the committed tails are read
        (`Transactions.initialise`); a superseded task stops for good. Whether the partitions may start."""
        if self._transactions is None or self._transactions.ready:
            return True
        error = self._transactions.initialise(superseded=self._superseded)
        if error is not None and error.kind is SliceErrorKind.SUPERSEDED:
            self._stop_fenced(error, errors)
        elif error is not None:  # retried next slice (a new sink if this one cannot go on)
            if not self._transactions.ready_to_retry:
                self._delivery.replace_sink()
            for key, remote_topic in starting.items():
                self._record_error(dataclasses.replace(error, partition=key), errors, remote_topic)
        return error is None

    def _check_deliveries(self, errors: list[SliceError]) -> None:
        refused = self._delivery.take_refused()
        for failed in refused:
            self._record_error(failed.slice_error(), errors)
        alone = {failed.state.key for failed in refused}
        for error in self._delivery.failures(self._states):
            self._record_error(error, errors)
            key: TopicPartition = error.partition  # type: ignore[assignment]
            if key in alone or self._delivery.restart_alone(self._states[key]):
                self._restart_keys.add(key)
            else:
                self._restart_needed = True

    def _serve(
        self,
        timeout: float,
        errors: list[SliceError],
        *,
        flush: bool = True,
        until: threading.Event | None = None,
    ) -> None:
        """`Delivery.serve`: a transactional producer's fatal errors (fenced) raised there fail the transaction."""
        try:
            self._delivery.serve(timeout, flush=flush, until=until)
        except Exception as exc:
            if self._transactions is None:
                raise
            self._transaction_failed(self._transactions.failed("delivering records", exc), errors)

    def _transaction_failed_fatally(self, failed: ProduceFailed, errors: list[SliceError]) -> bool:
        """A transactional producer's fatal refusal ("Local: Fatal error"): its queued report says why (fenced,
        most often), served now so the transaction fails as that, not as this partition's ERROR."""
        if self._transactions is None or not self._transactions.fatal(failed.cause):
            return False
        self._serve(0.1, errors, flush=False)  # the report is queued already
        return bool(self._fenced or self._restart_needed)

    def _transaction_failed(self, failed: TransactionFailed, errors: list[SliceError]) -> None:
        """Fenced or superseded: this task stops for good (another worker runs it). Otherwise every running partition
        restarts from its committed records (next slice, a fresh producer whose init_transactions aborts
        the transaction if `Transactions.fail` could not): nothing of it is ever persisted."""
        assert self._transactions is not None
        self._progress.collect(self._states, self._clock())  # what it held (still open): counted apart
        running = [key for key, state in self._states.items() if not state.stopped]
        error = self._transactions.fail(
            failed,
            superseded=self._superseded_after(failed),
            running=len(running),
            now=self._clock(),
        )
        if error.kind is not SliceErrorKind.TRANSACTION:
            self._stop_fenced(error, errors)
            return
        for key in running:  # restarted next slice: their records after the last commit are gone
            del self._states[key]
        self._states_changed()
        self._restart_needed = True
        self._log_error(error, errors)

    def _superseded_after(self, failed: TransactionFailed) -> str | None:
        """Why this task's assignment is not the flow's any more, if it is not: asked of a fenced task, and
        of any other failed transaction (a commit racing the new assignment's init hears what Kafka's
        coordinator answers, not always "fenced"), where a lease store that cannot answer means no."""
        if failed.failure == TransactionFailure.FENCED:
            return self._superseded()
        try:
            return self._superseded()
        except Exception:
            log.warning("%s: could not read whether the task was superseded", self._label, exc_info=True)
            return None

    def _stop_fenced(self, error: SliceError, errors: list[SliceError]) -> None:
        """Stop for good: nothing more is written (`run_slice` raises `TaskFenced`)."""
        self._fenced = error.message
        self._states = {key: state for key, state in self._states.items() if state.stopped}
        self._assigned = []
        self._states_changed()
        errors.append(error)  # superseded: the fencing of a new assignment working as designed
        level = logging.WARNING if error.kind is SliceErrorKind.SUPERSEDED else logging.ERROR
        log.log(level, "%s: %s", self._label, error)

    def _log_error(self, error: SliceError, errors: list[SliceError]) -> None:
        slices.log_error(log, self._label, error, errors)

    def _record_error(self, error: SliceError, errors: list[SliceError], remote_topic: str = "") -> None:
        """An error about one partition (running, unless its `remote_topic` is given): also its metrics'
        last error."""
        self._log_error(error, errors)
        assert error.partition is not None
        remote_topic = remote_topic or self._states[error.partition].remote_topic
        self._reporter.error(
            error.partition, remote_topic=remote_topic, message=error.message, now=self._clock()
        )
