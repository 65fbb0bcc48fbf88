"""Delivery: the producer side of a `MirrorSourceTask` (what Kafka Connect's `WorkerSourceTask` does for
a source task): the current sink, producing each fetched batch to the remote partitions, and the
acknowledgements its delivery reports bring (`replication.partition_state`).

Each record is produced to the remote topic on its source partition number with its key, value, every
header in order (as the header rule rewrites them: provenance, the source offset of exactly_once) and its
timestamp, in order per partition; a partition's in-flight offsets move its position only once
acknowledged. While the sink's queue is full (`BufferError`) its reports are served instead of producing
more. A record the sink refuses (too large, a producer failed fatally) fails its partition there
(`ProduceFailed`); a delivery that failed fails its partition at that record (`failures`), and the task
restarts its partitions on a fresh sink (`replace_sink`), so no old report interleaves with new records,
or that partition alone when the target did not know its remote partition (`restart_alone`).

A transactional sink asks for one report per run (a partition's consecutive records of a batch) instead
of one per record: its commit delivers every record of the transaction or fails it
(`PartitionState.run_reporter`, `deliver_committed`). A report costs the client a message object (the
value copied) and a Python call; the engine's share of CPU per record beside a bare loop was mostly that.
At at_least_once, a gapless sink (`TaskIO.batch_reports_within_s`) asks for one report per partition per
batch, on its last record: a report that comes in time vouches for the records before it
(`PartitionState.batch_reporter`). Where a record may be skipped or held (header rules, schema IDs), or
once a report came too late, every record asks for its own.

exactly_once adds the source-offset header (`replication.mirroring`). In Kafka transactions, where every
fetched record is sent as it is (no header rule, no schema IDs), only each run's first and last record
carry it, a run now ending at a gap in the source offsets too (`_send_runs`): the records between follow
one after another on both sides, which `replication.mirroring.source_offsets` places, and the last record
of each partition in each transaction carries its own (where a restart resumes). At 100 B the header on
every record cost about 15% of exactly_once's records/s (docs/performance.md).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Any

from replication.mirroring import SKIP, SOURCE_OFFSET_HEADER, pack_source_offset, with_source_offset
from replication.partition_state import Acknowledgements, PartitionState
from replication.schema_hold import SchemaHold
from replication.slices import SliceError, SliceErrorKind
from replication.task_io import Headers, RecordSink, SchemaRewriter, SchemaWait, SourceRecord, TaskIO
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

SINK_WARM_TIMEOUT_S = 10.0
FLUSH_STEP_S = 0.1  # a flush that may be given up checks between steps of this long
HeaderRewrite = Callable[[Headers, int], Any]  # new headers, or `replication.mirroring.SKIP`


def _has_leader(listed: Any, partition: int) -> bool:
    """A topic's metadata (confluent-kafka's `TopicMetadata`, None when not listed) shows `partition`
    with a leader."""
    if listed is None or listed.error is not None:
        return False
    found = listed.partitions.get(partition)
    return found is not None and found.error is None and found.leader >= 0


def _knows(partitions_known: frozenset[int] | None, states: Sequence[PartitionState]) -> bool:
    """Whether a sink that knew `partitions_known` of a topic (None: all) knows these partitions of it."""
    return partitions_known is None or all(state.partition in partitions_known for state in states)


class ProduceFailed(Exception):
    """The sink refused a record (too large, or the producer failed fatally): its partition failed at it."""

    def __init__(self, state: PartitionState, offset: int, cause: Exception) -> None:
        super().__init__(f"producing {state.topic}[{state.partition}] offset {offset}: {cause}")
        self.state, self.offset, self.cause = state, offset, cause

    def slice_error(self) -> SliceError:
        return SliceError(SliceErrorKind.PRODUCE, str(self), self.state.key)


def _each_partitions_last(messages: Sequence[SourceRecord]) -> set[int]:
    """The ids of each partition's last record (not a fetch error) in a batch."""
    last = {}
    for message in messages:
        if message.error() is None:
            last[message.topic(), message.partition()] = message
    return {id(message) for message in last.values()}


class Delivery:
    """One task's sink and acknowledgements. `send` runs once per fetched batch, its loop once per record:
    keep that loop lean (its per-record work is the engine's hot path)."""

    def __init__(
        self,
        *,
        io: TaskIO,
        rewrite: HeaderRewrite | None,
        schema_ids: SchemaRewriter | None,
        hold: SchemaHold,
        label: str,
    ) -> None:
        self._io, self._label = io, label
        self._rewrite, self._schema_ids, self._hold = rewrite, schema_ids, hold
        self.sink: RecordSink = io.sink()
        self.acks = Acknowledgements()
        self._per_run = io.transactional  # one report per run: a commit confirms the rest
        # At at_least_once, one report per partition per batch, trusted when it comes this soon; None: one
        # per record (also once a report came too late: `_late`). Not where a record may be skipped or
        # held: the partition's last record of a batch would not always be sent.
        self._batch_within_s = (
            io.batch_reports_within_s
            if not io.transactional and rewrite is None and schema_ids is None
            else None
        )
        # In transactions, where the header rule only adds the source offset (`header_rewriter` gives
        # `with_source_offset`) and no schema ID holds a record: that header on run ends only.
        self._run_ends = io.transactional and rewrite is with_source_offset and schema_ids is None
        # The remote topics the current sink knows, each with the partitions it knows to have a leader
        # (`warm`); None: a sink that knows every partition (in memory)
        self._warmed: dict[str, frozenset[int] | None] = {}
        # A refusal of one record (too large, its topic unknown) leaves the sink usable: its partition
        # stops sending and restarts alone (`take_refused`), the batch goes on. Not in a transaction,
        # which fails with the refused record.
        self._partition_only = None if io.transactional else io.refusal_partition_only
        self._refused_records: list[ProduceFailed] = []

    def __len__(self) -> int:
        """Records produced and not acknowledged (nor failed) yet."""
        return len(self.sink)

    def serve(self, timeout: float, *, flush: bool = True, until: threading.Event | None = None) -> None:
        """Serve the sink's delivery reports: flush (wait for every record, up to `timeout`, or until
        `until` is set: noticed within `FLUSH_STEP_S`) or one poll. A transactional producer raises its
        fatal errors (fenced) here."""
        if flush:
            self._flush(timeout, until)
            self.acks.settle()
        else:
            self.poll(timeout)

    def _flush(self, timeout: float, until: threading.Event | None) -> None:
        if until is None:
            self.sink.flush(timeout)
            return
        deadline = time.monotonic() + timeout
        while self.sink.flush(min(max(deadline - time.monotonic(), 0.0), FLUSH_STEP_S)):
            if until.is_set() or time.monotonic() >= deadline:
                return

    def poll(self, timeout: float) -> None:
        """Serve the reports there are (waiting up to `timeout` for one) and settle them."""
        self.sink.poll(timeout)
        self.acks.settle()

    def replace_sink(self) -> None:
        """A fresh sink; what the old one still held is flushed first (or aborted, if it failed)."""
        self._warmed.clear()
        try:
            self.sink.flush(self._io.settle_timeout_s)
        except Exception:  # a transactional producer that failed fatally: what it held is aborted
            log.debug("%s: flushing the old producer", self._label, exc_info=True)
        self.acks.settle()
        self.sink = self._io.sink()

    def warm(self, states: Mapping[TopicPartition, PartitionState]) -> set[TopicPartition]:
        """The sink learns the remote topics before their first records: a new producer's first records
        otherwise waited 0.5-1 s for its metadata (measured: the first 10,000 records of a dedicated task
        were acknowledged after a whole 0.5 s slice). Only topics about to be written: on brokers that
        create topics on a metadata request, producing would ask the same.

        Returns the partitions whose remote partition the answer does not show with a leader yet (a
        topic being created, on a broker still creating thousands of partitions): records sent there
        would wait in the producer (an unknown topic up to `topic.metadata.propagation.max.ms`, 30 s,
        then fail), and every flush of the task with them (a settle, a restart). A sink that answers
        nothing (in memory) knows every topic.

        A topic is asked again when a partition it did not show starts (the topic grew since): librdkafka
        refuses a partition past the count it last heard of at once, as unknown, and refreshes that count
        only every `topic.metadata.refresh.interval.ms` (5 min), while an answer to this request updates it."""
        unready: set[TopicPartition] = set()
        by_topic: dict[str, list[PartitionState]] = {}
        for state in states.values():
            by_topic.setdefault(state.remote_topic, []).append(state)
        for topic, partitions in sorted(by_topic.items()):
            if topic in self._warmed and _knows(self._warmed[topic], partitions):
                continue
            try:
                metadata: Any = self.sink.list_topics(topic, timeout=SINK_WARM_TIMEOUT_S)
            except Exception as exc:  # not needed for correctness: the first records wait instead
                log.info("%s: metadata of %s not known yet: %s", self._label, topic, exc)
                continue
            listed = None if metadata is None else metadata.topics.get(topic)
            missing = (
                []
                if metadata is None
                else [s.key for s in partitions if not _has_leader(listed, s.partition)]
            )
            unready.update(missing)
            if not missing:
                self._warmed[topic] = (  # None from a sink that answers nothing (`missing` otherwise)
                    None
                    if listed is None
                    else frozenset(p for p in listed.partitions if _has_leader(listed, p))
                )
        return unready

    def _late(self, waited_s: float) -> None:
        if self._batch_within_s is not None:
            self._per_record(
                f"a delivery report came {waited_s:.0f} s after its batch was sent (message.timeout.ms "
                f"allows it to vouch for the records before it for {self._batch_within_s:.0f} s)"
            )

    def _per_record(self, why: str) -> None:
        """From now on every record asks for its own report (said once, with `why`)."""
        if self._batch_within_s is not None:
            log.warning("%s: %s: from now on every record asks for its own report", self._label, why)
        self._batch_within_s = None

    def send(
        self,
        messages: Sequence[SourceRecord],
        *,
        states: Mapping[TopicPartition, PartitionState],
        polled: list[PartitionState],
        on_fetch_error: Callable[[SourceRecord], None],
        wait_for_room: Callable[[], bool],
    ) -> bool:
        """Produce a fetched batch, in order, each partition's records after its last sent one; a batch's
        partitions seen for the first time go to `polled` (their record age is observed after the fetch).
        Records of partitions that are not running (fetched before a reassignment, stopped, held) are
        dropped: they are fetched again from their position. While the sink is full, `wait_for_room`
        runs between polls; False from it ends the batch (and this returns False)."""
        if self._run_ends:
            return self._send_runs(
                messages,
                states=states,
                polled=polled,
                on_fetch_error=on_fetch_error,
                wait_for_room=wait_for_room,
            )
        produce = self.sink.produce
        # A sink of several producers (`ShardedSink`): each partition's run goes to its own one directly.
        route = getattr(self.sink, "route", None)
        rewrite, schema_ids, hold = self._rewrite, self._schema_ids, self._hold
        per_run = self._per_run
        within_s, late = self._batch_within_s, self._late
        if within_s is not None:
            sent_at = time.monotonic()  # before any record of the batch is sent
            batch_last = _each_partitions_last(messages)
        run_start = False  # per run: the next record sent is its run's first (it asks for the report)
        last_topic: str | None = None
        last_partition: int | None = -1
        state: PartitionState | None = None
        remote_topic, on_delivery, in_flight = "", None, None
        for message in messages:
            if message.error() is not None:
                on_fetch_error(message)
                continue
            topic, partition = message.topic(), message.partition()
            if partition != last_partition or topic != last_topic:
                last_topic, last_partition = topic, partition
                state = states.get((topic, partition))  # type: ignore[arg-type]
                if (
                    state is None
                    or state.stopped
                    or state.schema_wait is not None
                    or state.failed_at is not None
                ):
                    state = None  # fetched before a reassignment (not ours any more), or failed: it restarts
                    continue
                if state.last_polled_timestamp_ms is None:  # its first records of this fetch
                    polled.append(state)
                remote_topic, on_delivery, in_flight = state.remote_topic, state.on_delivery, state.in_flight
                if route is not None:
                    produce = route(remote_topic, partition)
                # Per run (a transaction), or a partition's very first record at at_least_once: it places
                # that record exactly, so the next report knows where its records went (`settle`).
                run_start = per_run or (within_s is not None and state.acked_downstream < 0 and not in_flight)
            elif state is None:
                continue
            offset = message.offset()
            assert offset is not None  # a record (no error) has its offset
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
                    hold.hold(state, offset, wait)
                    state = None  # its other records fetched with it wait as well
                    continue
            if within_s is not None:
                if run_start or id(message) in batch_last:
                    on_delivery, run_start = (
                        state.batch_reporter(sent_at=sent_at, within_s=within_s, late=late),
                        False,
                    )
                else:
                    on_delivery = None
            elif per_run:
                if run_start:
                    on_delivery, run_start = state.run_reporter(), False
                else:
                    on_delivery = None
            timestamp = (
                timestamp if timestamp_type else 0
            )  # 0 asks the producer for "now": the record has none
            try:
                produce(
                    remote_topic,
                    value=value,
                    key=key,
                    partition=partition,  # type: ignore[arg-type]
                    timestamp=timestamp,
                    headers=headers,
                    on_delivery=on_delivery,  # type: ignore[arg-type]
                )
            except Exception as exc:
                sent = (remote_topic, value, key, partition, timestamp, headers, on_delivery)
                produced = self._refused(exc, state, offset, sent, wait_for_room)
                if produced is None:  # this record refused: its partition restarts from it, the batch goes on
                    state = None
                    continue
                if not produced:
                    return False  # the position stays before this record: not sent yet
            in_flight.append(offset)  # type: ignore[union-attr]
            if on_delivery is not state.on_delivery:  # one report for many: their sizes are counted here
                state.sent_bytes += len(message)
            state.next_offset = offset + 1  # only now: a position may be persisted in between
        return True

    def _send_runs(
        self,
        messages: Sequence[SourceRecord],
        *,
        states: Mapping[TopicPartition, PartitionState],
        polled: list[PartitionState],
        on_fetch_error: Callable[[SourceRecord], None],
        wait_for_room: Callable[[], bool],
    ) -> bool:
        """`send` in a transaction where every fetched record of a running partition is sent as it is: one
        report per run (`PartitionState.run_reporter`), and the source-offset header on each run's first
        and last record only, a run ending where the next record is another partition's, a fetch error,
        not the next source offset, or the end of the batch. So a record is produced once the next one is
        seen (`held`)."""
        produce = self.sink.produce
        pack = pack_source_offset
        held: SourceRecord | None = None  # seen, not produced yet: whether it ends its run is not known yet
        held_state: PartitionState | None = None
        held_topic, held_partition, held_offset = "", -1, -1
        held_marked = False  # it begins its run: it carries its source offset either way
        held_report = None
        # A record whose value reaches half the sink's limit may be refused (key and headers count too):
        # the one before it carries its source offset, so a transaction that commits without the refused
        # record still ends on a record with one.
        limit = self._io.record_limit_bytes
        near_limit = math.inf if limit is None else limit // 2
        last_topic: str | None = None
        last_partition: int | None = -1
        state: PartitionState | None = None
        topic, partition, offset = "", -1, -1
        for message in chain(messages, (None,)):
            fetch_error = message is not None and message.error() is not None
            if message is not None and not fetch_error:
                topic, partition = message.topic(), message.partition()  # type: ignore[assignment]
                offset = message.offset()  # type: ignore[assignment]
            if held is not None:
                assert held_state is not None
                headers = held.headers()
                if (
                    held_marked
                    or message is None
                    or fetch_error
                    or offset != held_offset + 1
                    or partition != held_partition
                    or topic != held_topic
                    or len(message) >= near_limit  # the sink may refuse the next one: its run ends here
                ):
                    headers = [*(headers or ()), (SOURCE_OFFSET_HEADER, pack(held_offset))]
                timestamp_type, timestamp = held.timestamp()
                held_state.last_polled_timestamp_ms = timestamp
                timestamp = timestamp if timestamp_type else 0
                key, value = held.key(), held.value()
                try:
                    produce(
                        held_state.remote_topic,
                        value=value,
                        key=key,
                        partition=held_partition,
                        timestamp=timestamp,
                        headers=headers,
                        on_delivery=held_report,  # type: ignore[arg-type]
                    )
                except Exception as exc:
                    sent = (
                        held_state.remote_topic,
                        value,
                        key,
                        held_partition,
                        timestamp,
                        headers,
                        held_report,
                    )
                    if not self._refused(exc, held_state, held_offset, sent, wait_for_room):
                        return False
                held_state.in_flight.append(held_offset)
                held_state.sent_bytes += len(held)
                held_state.next_offset = held_offset + 1
                held = None
            if message is None:
                break
            if fetch_error:
                on_fetch_error(message)
                continue
            run_start = False
            if partition != last_partition or topic != last_topic:
                last_topic, last_partition = topic, partition
                state = states.get((topic, partition))
                if state is None or state.stopped or state.schema_wait is not None:
                    state = None  # fetched before a reassignment: not ours any more
                    continue
                if state.last_polled_timestamp_ms is None:  # its first records of this fetch
                    polled.append(state)
                run_start = True
            elif state is None:
                continue
            held, held_state = message, state
            held_topic, held_partition, held_offset = topic, partition, offset
            held_marked = run_start or offset != state.next_offset  # a run's first, or after a gap
            held_report = state.run_reporter() if run_start else None
        return True

    def _refused(
        self,
        exc: Exception,
        state: PartitionState,
        offset: int,
        sent: tuple[Any, ...],
        wait_for_room: Callable[[], bool],
    ) -> bool | None:
        """The sink refused the record at `offset` (`sent`: the produce call's topic, value, key, partition,
        timestamp, headers and callback). While it is full (`BufferError`: the target is behind) its reports
        are served, nothing more fetched, and the record produced again once `wait_for_room` allows;
        False when it does not (the batch ends, this record not sent). Any other refusal fails its
        partition there: None when it concerns that record or partition only (too large, its topic unknown:
        `TaskIO.refusal_partition_only`), kept for `take_refused`, else raised (`ProduceFailed`: the
        producer failed fatally, or a transaction's record)."""
        topic, value, key, partition, timestamp, headers, on_delivery = sent
        while isinstance(exc, BufferError):
            self.poll(0.05)
            if not wait_for_room():
                return False
            try:
                self.sink.produce(
                    topic,
                    value=value,
                    key=key,
                    partition=partition,
                    timestamp=timestamp,
                    headers=headers,
                    on_delivery=on_delivery,
                )
                return True
            except Exception as again:
                exc = again
        if self._partition_only is not None and self._partition_only(exc):
            # One report per partition per batch: those sent before it since the partition's last report
            # asked for none, and the record that would have vouched for them (the batch's last) is not
            # sent. A timeout of one of them would go unheard: it restarts from the oldest in flight, and
            # every record asks for its own report from now on, so it then fails here alone.
            unvouched = self._batch_within_s is not None and bool(state.in_flight)
            if unvouched:
                self._per_record(f"a record of {state.topic}[{state.partition}] was refused when sent")
            state.fail(state.in_flight[0] if unvouched else offset, str(exc))
            self._refused_records.append(ProduceFailed(state, offset, exc))
            return None
        state.fail(offset, str(exc))
        raise ProduceFailed(state, offset, exc) from exc

    def restart_alone(self, state: PartitionState) -> bool:
        """Whether a partition whose delivery failed (`failures`) restarts alone, from that record, on this
        sink: its batch report came too late to vouch for the records before it (no error: the sink is
        fine, `PartitionState.batch_reporter`), or the target did not know its remote partition
        (`TaskIO.unknown_partition`); both concern that partition only. A remote topic the target did not
        know is asked about again before the partition starts (`warm`), so it waits until the target lists
        it with a leader instead of failing again. Otherwise the task's partitions restart on a new sink.
        At 5,000 new partitions a target still creating them sent late reports for some: each one
        restarted every partition on a new producer."""
        failure, unknown = state.failure, self._io.unknown_partition
        if self._partition_only is None:
            return False
        if failure is None:
            return True
        if unknown is None or not unknown(failure):
            return False
        self._warmed.pop(state.remote_topic, None)
        return True

    def take_refused(self) -> list[ProduceFailed]:
        """The records refused since the last call whose partition alone restarts (`_refused`)."""
        refused, self._refused_records = self._refused_records, []
        return refused

    def failures(self, states: Mapping[TopicPartition, PartitionState]) -> list[SliceError]:
        """The running partitions a delivery failed since the last call: each restarts from that record."""
        return [
            SliceError(
                SliceErrorKind.DELIVERY,
                f"delivery of {state.topic}[{state.partition}] offset {state.failed_at} to "
                f"{state.remote_topic} failed: {state.error}; the partition restarts from there",
                key,
            )
            for key, state in self.acks.take_failed().items()
            if states.get(key) is state and state.failed_at is not None
        ]
