"""A running partition the source passes over: records wait for it on the source, the task fetches other
partitions' records, and none of its own comes for `FETCH_STALL_S` (`FetchStalls`). The task then has its
source fetch it again from its next offset (`RecordSource.assign(again=)`), with a warning naming it.

Found at 5,000 partitions on Apache Kafka (docs/scale.md): once in a few runs one partition started at
offset 0 beside its topic's others and never gave a record, its source end offset known and rising, the
task healthy and silent. Fetching it again sets its fetch going from the task's position whatever stopped
it (librdkafka's fetch state, or records handed over and not taken); the warning says which it was: the
position the source gives next beside the task's own. When it is neither, the warning comes again every
`FETCH_STALL_S`, and the partition's growing lag says the rest.

Cheap at any size: partitions are looked at in a rotation of their own, each about every
`STALL_LOOK_PERIOD_S` (an idle task of 2,000 partitions asks its source about 17 of them a slice for it;
a partition fetched this slice costs nothing), and only in a slice that did not end caught up; a partition is
judged passed over only while the task fetches others or holds nothing in flight (a task short of room in
its producer fetches nothing, and passes over nobody). A partition whose records wait
longer than `FETCH_STALL_S` in the consumer's prefetch queue (tens of megabytes behind a slow target) is
fetched again for nothing but the queue's share of it: no record is lost or doubled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from replication.partition_state import PartitionState
from replication.progress import unread
from replication.task_io import RecordSource
from replication.task_metrics import Rotation
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FETCH_STALL_S = 120.0
STALL_LOOK_PERIOD_S = 30.0  # each running partition is looked at about this often


class FetchStalls:
    """`check` each slice, before `fetched` is emptied; `reseek` holds the partitions to fetch again."""

    def __init__(self, *, source: RecordSource, label: str, after_s: float = FETCH_STALL_S) -> None:
        self._source, self._label, self._after_s = source, label, after_s
        self.reseek: set[TopicPartition] = set()
        self._waiting_since: dict[TopicPartition, float] = {}  # records waiting, none fetched since
        self._rotation = Rotation(period_s=STALL_LOOK_PERIOD_S)

    def check(
        self,
        states: Mapping[TopicPartition, PartitionState],
        *,
        fetched: Sequence[PartitionState],
        caught_up: bool,
        in_flight: int,
        now: float,
    ) -> None:
        """`fetched`: the partitions fetched this slice; `caught_up`: the slice found every running
        partition read to its end (none passed over: nothing to look at); `in_flight`: records the
        producer holds (with none fetched, a task waiting for room, not passing anyone over)."""
        waiting_since = self._waiting_since
        for polled in fetched:
            waiting_since.pop(polled.key, None)
        if caught_up:
            return
        fetching = bool(fetched) or not in_flight
        for key in self._rotation.take(now=now):
            state = states.get(key)
            if state is None or state.polled:  # fetched this slice: not passed over, no client call
                continue
            if state.stopped or state.in_flight or state.failed_at is not None:
                waiting_since.pop(key, None)
                continue
            records = unread(self._source, state)
            if records is None or records <= 0:
                waiting_since.pop(key, None)
                continue
            since = waiting_since.setdefault(key, now)
            if not fetching or now - since < self._after_s:
                continue
            del waiting_since[key]
            self.reseek.add(key)
            position = self._source.position(*key)
            log.warning(
                "%s: %s[%d]: %d record(s) wait on the source and none was fetched for %.0f s while the task "
                "fetched others (the source's next offset for it: %s, the task's: %d): fetching it again",
                self._label,
                *key,
                records,
                now - since,
                "none yet" if position is None else position,
                state.next_offset,
            )

    def keep_only(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """The task's partition states changed: a partition gone or started again waits afresh."""
        self._waiting_since = {key: since for key, since in self._waiting_since.items() if key in states}
        self._rotation.reset(list(states))
