"""The data-loss check of a `MirrorSourceTask`: source records that no longer exist when the task reaches
them (retention deleted them, or the topic was recreated so its end is below the position).

A partition is checked when the source reports its fetch offset out of range, when it was fetched this
slice, when its end already looked wrong, and in turn with the others (the `swept` share); an idle
partition whose fetched watermarks exclude its position for `gap_confirm_s` is read to confirm. A
confirmed gap is a `GapEvent` (to the metrics and the log), then the partition stops
(`data.loss.policy=stop`, its error in the flow's status) or resumes at the earliest offset (`skip`). The
MM2 decisions are the pure functions of `replication.mirroring`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from replication.config import DataLossPolicy
from replication.metrics import GapEvent
from replication.mirroring import detect_data_loss, gap_event, gap_suspected
from replication.partition_state import PartitionState
from replication.positions import PositionWriter
from replication.slices import SliceError, SliceErrorKind
from replication.task_io import PartitionReader, PartitionReadError, RecordSource, SourceRecord
from replication.task_metrics import TaskMetrics
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

# A partition whose end stays below its position this long is checked for data loss (on Apache Kafka
# the broker reports such an offset as out of range at once; some brokers only return nothing).
GAP_CONFIRM_S = 2.0


class DataLossCheck:
    """One task's check: the partitions reported out of range, and those whose end looks wrong since."""

    def __init__(
        self,
        *,
        source: RecordSource,
        reader: Callable[[], PartitionReader],
        policy: DataLossPolicy,
        metrics: TaskMetrics,
        positions: PositionWriter,
        gap_confirm_s: float,
        label: str,
    ) -> None:
        self._source, self._reader, self._policy = source, reader, policy
        self._metrics, self._gap_confirm_s, self._label = metrics, gap_confirm_s, label
        self._positions = positions
        self.out_of_range: set[TopicPartition] = set()
        self.suspects: dict[TopicPartition, PartitionState] = {}
        # Partitions stopped, resumed elsewhere or no longer fetched: the source assigns them anew.
        self.reseek: set[TopicPartition] = set()

    def fetch_error(
        self, message: SourceRecord, states: Mapping[TopicPartition, PartitionState]
    ) -> SliceError | None:
        """A fetch that failed: a running partition's offset out of range is checked for data loss at the
        slice end; an event that is no error is nothing; any other failure of a running partition is a
        `CONSUME` error (of another, or of the consumer, a warning)."""
        error = message.error()
        assert error is not None
        if self._source.is_benign(error):
            return None
        topic, partition = message.topic(), message.partition()
        key = (topic, partition) if topic and partition is not None else None
        state = states.get(key) if key else None
        if key and state is not None and self._source.is_out_of_range(error):
            self.out_of_range.add(key)
            return None
        text = f"consuming {topic}[{partition}]: {error.str()}" if key else f"consumer: {error.str()}"
        if state is None:
            log.warning("%s: %s", self._label, text)
            return None
        return SliceError(SliceErrorKind.CONSUME, text, key)

    def check(
        self,
        states: Mapping[TopicPartition, PartitionState],
        *,
        fetched: list[PartitionState],
        swept: Sequence[TopicPartition],
        now: float,
    ) -> tuple[list[GapEvent], list[SliceError]]:
        """The gaps found (each partition at most once) and the partitions they stopped; `fetched` (the
        partitions fetched this slice) is emptied for the next."""
        events: list[GapEvent] = []
        errors: list[SliceError] = []
        checked = {key: states[key] for key in (*self.out_of_range, *swept) if key in states}
        checked.update(self.suspects)
        checked.update((state.key, state) for state in fetched)
        for key, state in checked.items():
            if (
                states.get(key) is not state
                or state.stopped
                or state.in_flight
                or state.failed_at is not None
            ):
                continue
            reported = key in self.out_of_range
            looks_wrong = not reported and self._end_looks_wrong(state, now)
            if state.suspect_since is None:
                self.suspects.pop(key, None)
            else:
                self.suspects[key] = state
            if not reported and not looks_wrong:
                continue
            try:
                low, end, _ = self._reader().tail(state.topic, state.partition)
            except PartitionReadError as exc:  # an out-of-range report stays: the source fetches it no more
                log.warning("%s: data-loss check of %s[%d] (retried next slice): %s", self._label, *key, exc)
                continue
            self.out_of_range.discard(key)
            loss = detect_data_loss(expected_offset=state.next_offset, earliest_offset=low, end_offset=end)
            state.suspect_since = None
            self.suspects.pop(key, None)
            if reported:
                self.reseek.add(key)  # the source stopped fetching it: start it again
            if loss is None:
                continue
            event = gap_event(
                loss,
                topic=state.topic,
                partition=state.partition,
                expected_offset=state.next_offset,
                policy=self._policy,
                now=now,
            )
            events.append(event)
            stop = self._policy == DataLossPolicy.STOP
            self._metrics.gap(event, state, stopped=stop)
            message = loss.describe(state.topic, state.partition)
            if stop:
                state.stopped = True
                errors.append(
                    SliceError(
                        SliceErrorKind.DATA_LOSS, f"{message}; partition stopped (data.loss.policy=stop)", key
                    )
                )
            else:
                log.warning(
                    "%s: %s; resuming at offset %d (data.loss.policy=skip)",
                    self._label,
                    message,
                    event.resumed_offset,
                )
                state.next_offset = event.resumed_offset
                self._positions.dirty[key] = state
            self.reseek.add(key)
        for state in fetched:
            state.polled = False
        fetched.clear()
        return events, errors

    def _end_looks_wrong(self, state: PartitionState, now: float) -> bool:
        """An idle partition whose fetched watermarks exclude its position, for `gap_confirm_s` now."""
        state.suspect_since = gap_suspected(
            watermarks=None if state.polled else self._source.watermarks(*state.key),
            next_offset=state.next_offset,
            suspect_since=state.suspect_since,
            now=now,
        )
        return state.suspect_since is not None and now - state.suspect_since >= self._gap_confirm_s
