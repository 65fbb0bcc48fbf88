"""One source partition's replication state in a `MirrorSourceTask`, and the acknowledgements of a task's
partitions as they arrive (the ack tracking half of delivery).

`PartitionState.on_delivery` runs once per record, from the sink's delivery reports, and only keeps what
a successful report says (a failed one is settled at once); `Acknowledgements.settle`, after the sink
served its reports, settles each partition's kept reports together (`PartitionState.settle`): its
in-flight offsets, its acknowledged counts and offset-sync decisions, and lists the partition in
`touched` so that no collaborator ever walks every partition of a task to learn what moved. The
readers of acknowledgements (`take_touched`, `take_failed`, `untouched`) settle first. Everything else
reads or writes the fields between fetches (the task and its collaborators: `replication.delivery`,
`replication.transactions`, `replication.schema_hold`, `replication.task_metrics`,
`replication.positions`).

Per record that is one Python call keeping two ints: settling a run of a partition's reports whose source
and target offsets both advance by one (no compaction, no markers, no other writer) decides its offset
syncs per sync, not per record (`OffsetSyncWriter.on_run`), and sums the sizes in C.

In Kafka transactions a partition asks for one report per run (its consecutive records of a fetched batch,
`run_reporter`): the task's records of one transaction sit one after another on the remote partition (one
writer; markers only between transactions), so a report on a run's first record places it and the
records sent since the previous report, and the commit (`deliver_committed`) places the rest after the
last report. Unreported records are placed forward, right after the last record acknowledged: were
another writer's records between them on the remote partition, a place is never above the real one, so
an offset sync can only make a translated consumer re-read, never skip. Positions and offset syncs are
written only after a commit, and an aborted transaction restarts its partitions from what is committed,
so nothing is decided from a record its commit did not confirm.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

from replication.offset_syncs import OffsetSyncWriter
from replication.task_io import ClientError, DeliveryCallback, SchemaWait, SourceRecord
from replication.topic_partition import TopicPartition


class Acknowledgements:
    """What the delivery reports of a task's partitions did since the task last looked, kept as they
    arrive: totals, and the partitions that heard a report (`touched`, each once) or failed a record."""

    __slots__ = ("records", "bytes", "touched", "failed", "unsettled")

    def __init__(self) -> None:
        self.records = self.bytes = 0
        self.touched: list[PartitionState] = []
        self.failed: dict[TopicPartition, PartitionState] = {}
        self.unsettled: list[PartitionState] = []  # partitions with reports kept and not settled, each once

    def settle(self) -> None:
        """Settle the reports every partition kept since the last call (call after the sink served some)."""
        unsettled = self.unsettled
        if unsettled:
            states = unsettled.copy()
            unsettled.clear()  # in place: the partitions' callbacks append to this list
            for state in states:
                state.settle()

    @property
    def untouched(self) -> bool:
        """No partition heard a report since `take_touched` (the reports served so far settled)."""
        self.settle()
        return not self.touched

    def take_touched(self) -> list[PartitionState]:
        """The partitions that heard a report since the last call, each once."""
        self.settle()
        touched, self.touched = self.touched, []
        for state in touched:
            state.touched = False
        return touched

    def take_failed(self) -> dict[TopicPartition, PartitionState]:
        self.settle()
        failed, self.failed = self.failed, {}
        return failed


class PartitionState:
    """One source partition's replication state. `on_delivery` runs once per record: keep it lean."""

    __slots__ = (
        "acks",
        "on_delivery",
        "acked_offsets",
        "acked_sizes",
        "reported_places",
        "settled",
        "acked_downstream",
        "sent_bytes",
        "touched",
        "persisted_at",
        "topic",
        "partition",
        "remote_topic",
        "in_flight",
        "next_offset",
        "failed_at",
        "failure",
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
        acks: Acknowledgements,
    ) -> None:
        self.topic, self.partition, self.remote_topic = topic, partition, remote_topic
        self.acks = acks
        self.touched = False  # listed in acks.touched since the task last collected them
        self.in_flight: deque[int] = deque()  # source offsets produced, not acknowledged, in order
        self.next_offset = start  # next source offset to consume
        self.failed_at: int | None = None
        self.error: str | None = None
        self.failure: ClientError | None = None  # the client's error of that failure, when it gave one
        self.syncs = OffsetSyncWriter(topic=topic, partition=partition, offset_lag_max=offset_lag_max)
        self.acked_records = self.acked_bytes = self.skipped = 0
        self.reported_records = self.reported_bytes = self.reported_skipped = 0
        # Transactional: acked_records/bytes when a commit last included them (what counts as replicated).
        self.committed_records = self.committed_bytes = 0
        self.last_acked: SourceRecord | None = None
        self.observed_ack: SourceRecord | None = None
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
        # What the successful delivery reports since the last `settle` said, in produce order: each
        # record's target offset and size (ints, not the reports: thousands of reports kept alive made
        # every garbage collection walk them).
        self.acked_offsets: list[int] = []
        self.acked_sizes: list[int] = []
        # One report per run (`run_reporter`): each report's place among the records ever sent (the
        # records `settled` so far, then the in-flight ones), the target offset of the last record
        # acknowledged, and the bytes sent since the last settle.
        self.reported_places: list[int] = []
        self.settled = 0
        self.acked_downstream = -1
        self.sent_bytes = 0
        self.on_delivery = self._reporter()

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def position(self) -> int:
        """Next source offset to replicate: every record before it is acknowledged by the target. A
        partition that failed stays at its failed record, or before it while records sent before that one
        are still in flight (a record refused when sent, one report per record: a position written past
        them would lose them to a crash if their delivery then failed)."""
        in_flight = self.in_flight
        first = in_flight[0] if in_flight else self.next_offset
        failed_at = self.failed_at
        return first if failed_at is None or first < failed_at else failed_at

    @property
    def restartable(self) -> bool:
        """Failed, and no record sent before the failed one is still in flight: it may start again from
        its failed record on the same sink without waiting for anything else (what is still in flight
        after that record is no news: its reports go to this state, which is then dropped)."""
        return self.failed_at is not None and self.position == self.failed_at

    def fail(self, offset: int, error: str, failure: ClientError | None = None) -> None:
        """The record at `offset` did not reach the target (`failure`: the client's error in its delivery
        report): the position stays at or before it. Listed in `acks.failed` when its failed record moves
        (first, or earlier): the failure of a later record is no news, and a state restarted since (a new
        one for its partition, perhaps failed too) keeps its place there."""
        if self.failed_at is None or offset < self.failed_at:
            self.failed_at, self.error, self.failure = offset, error, failure
            self.acks.failed[(self.topic, self.partition)] = self

    def _reporter(self) -> DeliveryCallback:
        """The sink's delivery callback for this partition's records: a successful report's target offset
        and size are kept for `settle` (the partition listed once in `acks.unsettled`), a failed one
        settles what came before it and fails the partition at its record."""
        offsets, unsettled = self.acked_offsets, self.acks.unsettled
        keep_offset, keep_size = offsets.append, self.acked_sizes.append

        def on_delivery(error: ClientError | None, message: SourceRecord) -> None:
            if error is None:
                if not offsets:
                    unsettled.append(self)
                offset = message.offset()
                assert offset is not None  # a delivered record has its target offset
                keep_offset(offset)
                keep_size(len(message))
                self.last_acked = message
            else:
                self.settle()
                self._touch()
                self.fail(self.in_flight.popleft(), error.str(), error)

        return on_delivery

    def run_reporter(self) -> DeliveryCallback:
        """The delivery callback of a run's first record, about to be sent (in a transaction, the others of
        the run ask for no report, their sizes added to `sent_bytes`): its report places it and every
        record sent before it (`settle`); a failed one fails the partition at its record."""
        place = self.settled + len(self.in_flight)

        def on_delivery(error: ClientError | None, message: SourceRecord) -> None:
            if error is None:
                self._placed(place, message)
            else:
                self.settle()
                self._touch()
                self.fail(self.in_flight[place - self.settled], error.str(), error)

        return on_delivery

    def batch_reporter(
        self, *, sent_at: float, within_s: float, late: Callable[[float], None]
    ) -> DeliveryCallback:
        """The delivery callback of the partition's last record of a fetched batch, about to be sent
        (at_least_once, one report per partition per batch: its other records ask for none, their sizes
        added to `sent_bytes`). Its report places it and every record sent before it (`settle`) when it
        comes within `within_s` of `sent_at` (before the batch's first record was sent): the producer can
        have failed an earlier record without failing this one only by message.timeout.ms, which no record
        of the batch reached by then, and its gapless guarantee makes any other such failure fatal (the
        records of the partition on the target are a prefix of those sent). A failed report, or one that
        came later (`late` is told how late), fails the partition at its oldest record not acknowledged:
        those after it may or may not have been written, so it restarts from there (at_least_once). A
        partition that failed places nothing more: it restarts."""
        place = self.settled + len(self.in_flight)

        def on_delivery(error: ClientError | None, message: SourceRecord) -> None:
            if self.failed_at is not None:
                return
            waited_s = time.monotonic() - sent_at
            if error is None and waited_s < within_s:
                self._placed(place, message)
                return
            self.settle()
            self._touch()
            if error is None:
                late(waited_s)
                reason = (
                    f"its delivery report came {waited_s:.0f} s after the batch was sent, past the "
                    f"{within_s:.0f} s within which it vouches for the records before it"
                )
            else:
                reason = error.str()
            self.fail(self.in_flight[0], reason, error)

        return on_delivery

    def _placed(self, place: int, message: SourceRecord) -> None:
        """A one-per-run (or batch) report succeeded: `settle` places its record at `place`."""
        if not self.acked_offsets:
            self.acks.unsettled.append(self)
        offset = message.offset()
        assert offset is not None  # a delivered record has its target offset
        self.acked_offsets.append(offset)
        self.reported_places.append(place)
        self.last_acked = message

    def _touch(self) -> None:
        if not self.touched:
            self.touched = True
            self.acks.touched.append(self)

    def settle(self) -> None:
        """The kept reports, in produce order (the RecordSink's contract per partition): each acknowledges
        the oldest in-flight offset (one report per run: every in-flight offset up to its record's);
        counts and offset syncs follow. Reports of both kinds settle together once a late batch report
        turned the task's reports per record (`Delivery._late`) with batch reports still in flight: those
        were sent first, so they come first."""
        offsets = self.acked_offsets
        if not offsets:
            return
        places = self.reported_places
        failed_at = self.failed_at
        if failed_at is not None and self.in_flight and failed_at <= self.in_flight[0]:
            # Failed at its oldest record in flight (a late batch report): it restarts from there, and no
            # later report can say where the records before it went.
            offsets.clear()
            places.clear()
            self.acked_sizes.clear()
            self.sent_bytes = 0
            return
        if places:  # one report per run: each report places its record and those sent since the last one
            size, self.sent_bytes = self.sent_bytes, 0
            last = len(places) - 1
            for index, (place, offset) in enumerate(zip(places, offsets, strict=False)):  # offsets: more
                before = place - self.settled  # the rest of an earlier run, sent after the last acknowledged
                if before and offset - before != self.acked_downstream + 1:
                    # Not one after another: another writer's records on the remote partition. Ours go
                    # right after the last acknowledged, never above where they are: an offset sync too
                    # high would make a consumer translated past it skip records; too low, re-read some.
                    self._acknowledge(before, self.acked_downstream + 1, 0)
                    before = 0
                self._acknowledge(before + 1, offset - before, size if index == last else 0)
            del offsets[: len(places)]  # in place: the per-record callback appends to this list
            places.clear()
            if not offsets:
                return
        count = len(offsets)
        downstream = offsets[0]
        sizes = self.acked_sizes
        size = sum(sizes)
        sizes.clear()
        if offsets[-1] - downstream == count - 1:
            offsets.clear()
            self._acknowledge(count, downstream, size)
            return
        on_ack, take = self.syncs.on_ack, self.in_flight.popleft
        for offset in offsets:
            on_ack(take(), offset)
        self._acknowledged(count, offsets[-1], size)
        offsets.clear()

    def deliver_committed(self) -> None:
        """The transaction that sent every record in flight committed: each was delivered, in order,
        right after the last one acknowledged (the records after the last report of one per run)."""
        self.settle()
        count = len(self.in_flight)
        if count:
            size, self.sent_bytes = self.sent_bytes, 0
            self._acknowledge(count, self.acked_downstream + 1, size)

    def _acknowledge(self, count: int, downstream: int, size: int) -> None:
        """The oldest `count` in-flight records were acknowledged at `downstream` and after, one each."""
        in_flight, syncs = self.in_flight, self.syncs
        upstream = in_flight[0]
        if in_flight[count - 1] - upstream == count - 1:
            syncs.on_run(upstream, downstream, count)
            if count == len(in_flight):  # everything in flight acknowledged: the common case
                in_flight.clear()
            else:
                for _ in range(count):
                    in_flight.popleft()
        else:
            on_ack, take = syncs.on_ack, in_flight.popleft
            for target in range(downstream, downstream + count):
                on_ack(take(), target)
        self._acknowledged(count, downstream + count - 1, size)

    def _acknowledged(self, count: int, last_downstream: int, size: int) -> None:
        self.settled += count
        self.acked_downstream = last_downstream
        self.acked_records += count
        self.acked_bytes += size
        acks = self.acks
        acks.records += count
        acks.bytes += size
        self._touch()


def keep_only(
    states: Mapping[TopicPartition, PartitionState], *kept: dict[TopicPartition, PartitionState]
) -> None:
    """Drop from each of `kept` the partitions whose state is not in `states` any more (gone, restarted)."""
    for by_key in kept:
        for key in [key for key, state in by_key.items() if states.get(key) is not state]:
            del by_key[key]
