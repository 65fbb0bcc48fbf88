"""What a `MirrorSourceTask`'s fetches and acknowledgements moved since it last looked, routed to the
collaborators that act on it, kept per partition as it happens so that no fetch walks every partition
of the task (a task may hold thousands):

* a fetch's partitions: their record age (`TaskMetrics.polled`), a position that may have moved (a
  skipped record moves it without an acknowledgement), the partitions to check for gaps this slice
  (`fetched`) and those not known to be read to their end (`fetched_to_end`);
* the partitions that heard delivery reports: offset syncs and positions to write (`PositionWriter`),
  metrics to report, and their replication latency (transactional: once committed);
* the records waiting in the source for the task's running partitions (`Backlog`), looked at again only
  for the partitions started, fetched or stopped since it was last asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from replication.partition_state import Acknowledgements, PartitionState, keep_only
from replication.positions import PositionWriter
from replication.task_io import RecordSource
from replication.task_metrics import TaskMetrics
from replication.topic_partition import TopicPartition
from replication.transactions import Transactions


def unread(source: RecordSource, state: PartitionState) -> int | None:
    """The offsets of a partition the task has not read yet: its end as the source last reported it, minus
    where the task reads next (the consumer's position where that is ahead: past a transaction marker);
    None while the source does not know its end (a consumer's first fetches)."""
    watermarks = source.watermarks(*state.key)
    if watermarks is None:
        return None
    position = source.position(*state.key)
    return watermarks[1] - max(position if position is not None else -1, state.next_offset)


class Backlog:
    """The records waiting in the source for a task's running partitions: each one's `unread` offsets,
    summed (`TransactionSpan`: whether the open transaction goes on). Every running partition counts,
    whether or not it has records in the open transaction yet: a consumer returns long runs of one
    partition, and a partition it has not returned lately may hold most of the backlog.

    Each partition's figure is kept beside the total and looked at again only for the partitions started,
    fetched or stopped since the total was last asked (`moved`), when it is asked (a few times a
    transaction): no fetch and no question walks every partition of the task. One whose end the source
    does not know yet counts nothing and is looked at again next time."""

    def __init__(self, source: RecordSource) -> None:
        self._source = source
        self.moved: dict[TopicPartition, PartitionState] = {}  # to look at again when asked
        self._waiting: dict[TopicPartition, int] = {}
        self._total = 0

    def total(self) -> int:
        moved, self.moved = self.moved, {}
        waiting = self._waiting
        for key, state in moved.items():
            offsets = 0 if state.stopped else unread(self._source, state)
            if offsets is None:
                self.moved[key] = state
            records = max(offsets or 0, 0)
            self._total += records - waiting.get(key, 0)
            waiting[key] = records
        return self._total

    def keep_only(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """The task's partition states changed (once per change): a partition gone counts no more (one
        restarted counts again once started: `moved`)."""
        keep_only(states, self.moved)
        for key in [key for key in self._waiting if key not in states]:
            self._total -= self._waiting.pop(key)


class Progress:
    """One task's news: `polled_now` is filled by `Delivery.send` (a partition's first records of a fetch)."""

    def __init__(
        self,
        *,
        acks: Acknowledgements,
        positions: PositionWriter,
        metrics: TaskMetrics,
        transactions: Transactions | None,
        source: RecordSource,
    ) -> None:
        self._acks, self._positions, self._metrics = acks, positions, metrics
        self._transactions, self._source = transactions, source
        self.polled_now: list[PartitionState] = []
        self.fetched: list[PartitionState] = []  # fetched this slice, once each
        self.unconfirmed: dict[TopicPartition, PartitionState] = {}  # not known to be read to their end
        self.backlog = Backlog(source)

    def started(self, state: PartitionState) -> None:
        """A partition started: exactly_once recovery may have re-derived offset syncs (and moved it)."""
        key = state.key
        self._positions.dirty[key] = self._metrics.unreported[key] = self.unconfirmed[key] = state
        self.backlog.moved[key] = state

    def stopped(
        self, states: Mapping[TopicPartition, PartitionState], keys: Iterable[TopicPartition | None]
    ) -> list[TopicPartition]:
        """Partitions stopped where they are (a data-loss stop): no backlog of theirs waits any more."""
        found = [key for key in keys if key is not None]
        for key in found:
            self.backlog.moved[key] = states[key]
        return found

    def observe(self, states: Mapping[TopicPartition, PartitionState], now: float) -> None:
        """After a fetch, or before a commit: what the last fetch and the reports since brought."""
        self._observe_polls(states, now)
        self.collect(states, now)

    def _observe_polls(self, states: Mapping[TopicPartition, PartitionState], now: float) -> None:
        polled = list(self.polled_now)
        self.polled_now.clear()
        for state in polled:
            self._metrics.polled(state, now)
            key = state.key
            if states.get(key) is state:
                self._positions.dirty[key] = self._metrics.unreported[key] = self.unconfirmed[key] = state
                self.backlog.moved[key] = state
                if not state.polled:
                    state.polled = True
                    self.fetched.append(state)

    def collect(self, states: Mapping[TopicPartition, PartitionState], now: float) -> None:
        """The partitions that heard delivery reports since the last call."""
        transactions = self._transactions
        for state in self._acks.take_touched():
            key = state.key
            if states.get(key) is not state:  # restarted or gone meanwhile: its reports are no news
                continue
            self._positions.dirty[key] = self._metrics.unreported[key] = state
            if transactions is None:
                self._metrics.latency(state, now)
            else:  # observed once committed (`committed`)
                transactions.acknowledged(state)

    def committed(self, states: Mapping[TopicPartition, PartitionState], now: float) -> None:
        """The open transaction committed: every partition acknowledged in it (all dirty once collected,
        those whose reports came with the commit too) counts its records as replicated, and their
        replication latency is observed now."""
        assert self._transactions is not None
        self.collect(states, now)
        for key, state in self._transactions.committed(self._positions.dirty.values()).items():
            if states.get(key) is state:
                self._metrics.latency(state, now)

    def behind(self, records: int) -> bool:
        """At least `records` records wait in the source for the task's running partitions (`Backlog`;
        `TransactionSpan`: whether the open transaction goes on)."""
        return self.backlog.total() >= records

    def fetched_to_end(self) -> bool:
        """Every running partition was read to the end its source reports: a fetch that found nothing is
        not "caught up" before the consumer knows where the end is (a new consumer's first fetches come
        back empty while it looks up its partitions' leaders and offsets).

        Only the partitions started or fetched since they were last found at their end are asked, up to
        the first one that is not: an empty fetch of a caught-up task asks the source nothing."""
        unconfirmed = self.unconfirmed
        while unconfirmed:
            key, state = next(iter(unconfirmed.items()))
            if not state.stopped:
                waiting = unread(self._source, state)
                if waiting is None or waiting > 0:
                    return False
            del unconfirmed[key]
        return True
