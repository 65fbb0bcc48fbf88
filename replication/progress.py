"""What a `MirrorSourceTask`'s fetches and acknowledgements moved since it last looked, routed to the
collaborators that act on it, kept per partition as it happens so that no fetch walks every partition
of the task (a task may hold thousands):

* a fetch's partitions: their record age (`TaskMetrics.polled`), a position that may have moved (a
  skipped record moves it without an acknowledgement), the partitions to check for gaps this slice
  (`fetched`) and those not known to be read to their end (`fetched_to_end`);
* the partitions that heard delivery reports: offset syncs and positions to write (`PositionWriter`),
  metrics to report, and their replication latency (transactional: once committed).
"""

from __future__ import annotations

from collections.abc import Mapping

from replication.partition_state import Acknowledgements, PartitionState
from replication.positions import PositionWriter
from replication.task_io import RecordSource
from replication.task_metrics import TaskMetrics
from replication.topic_partition import TopicPartition
from replication.transactions import Transactions


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

    def started(self, state: PartitionState) -> None:
        """A partition started: exactly_once recovery may have re-derived offset syncs (and moved it)."""
        key = state.key
        self._positions.dirty[key] = self._metrics.unreported[key] = self.unconfirmed[key] = state

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
        """At least `records` records wait in the source past what the partitions acknowledged in the open
        transaction fetched, as the last fetches reported their ends (`TransactionSpan`: whether the
        transaction goes on). Asked a few times a transaction; it adds up to the first ones that reach
        `records`."""
        assert self._transactions is not None
        source, waiting = self._source, 0
        for state in self._transactions.uncommitted.values():
            watermarks = source.watermarks(*state.key)
            if watermarks is None:
                continue
            position = source.position(*state.key)
            waiting += watermarks[1] - max(position if position is not None else -1, state.next_offset)
            if waiting >= records:
                return True
        return False

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
                watermarks = self._source.watermarks(*key)
                if watermarks is None:
                    return False
                position = self._source.position(*key)
                if max(position if position is not None else -1, state.next_offset) < watermarks[1]:
                    return False
            del unconfirmed[key]
        return True
