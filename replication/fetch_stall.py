"""A running partition the source passes over: records wait for it on the source, the task fetches other
partitions' records, and none of its own comes (since it started, or was last fetched) for `FETCH_STALL_S`
or `FETCH_STALL_FACTOR` times as long as the task's partitions usually wait for their first record,
whichever is longer (`FetchStalls`). The task then has its source fetch it again from its next offset
(`RecordSource.assign(again=)`), with a warning naming it. When many partitions are overdue at once
(`STALL_MAX_FEW`, `STALL_MAX_SHARE`) the task is behind, not passing them over: none is fetched again.

Found at 5,000 partitions on Apache Kafka (docs/scale.md): once in a few runs one partition started at
offset 0 beside its topic's others and never gave a record, its source end offset known and rising, the
task healthy and silent. Fetching it again sets its fetch going from the task's position whatever stopped
it (librdkafka's fetch state, or records handed over and not taken); the warning says which it was: the
position the source gives next beside the task's own. When it is neither, the warning comes again every
`FETCH_STALL_S`. Its status says STALL (Burrow's word: records wait, its position does not move) from the
first warning until a record of it is fetched (`on_stall`).

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
from collections.abc import Callable, Mapping, Sequence

from replication.partition_state import PartitionState
from replication.progress import unread
from replication.task_io import RecordSource
from replication.task_metrics import Rotation
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FETCH_STALL_S = 120.0
# ... or this many times as long as the task's partitions waited for their first record after they started
# (at 5,000 partitions on a loaded machine, 100-140 s for every partition: none of them is passed over)
FETCH_STALL_FACTOR = 3.0
# More than this share of the task's partitions (and more than STALL_MAX_FEW) overdue at once: the task
# is behind, not passing them over
STALL_MAX_SHARE = 0.05
STALL_MAX_FEW = 10
FIRST_FETCH_WEIGHT = 0.05  # of each first fetch in the moving average of the waits for it
STALL_LOOK_PERIOD_S = 30.0  # each running partition is looked at about this often


class FetchStalls:
    """`check` each slice, before `fetched` is emptied; `reseek` holds the partitions to fetch again."""

    def __init__(
        self,
        *,
        source: RecordSource,
        label: str,
        on_stall: Callable[[PartitionState, bool, float], None],
        after_s: float = FETCH_STALL_S,
    ) -> None:
        """`on_stall(state, stalled, now)`: a partition is passed over (True) or fetched again since (False)."""
        self._source, self._label, self._after_s, self._on_stall = source, label, after_s, on_stall
        self._stalled: dict[TopicPartition, PartitionState] = {}  # passed over, not fetched since
        self.reseek: set[TopicPartition] = set()
        self._waiting_since: dict[TopicPartition, float] = {}  # records waiting, none fetched since
        self._rotation = Rotation(period_s=STALL_LOOK_PERIOD_S)
        self._started_at: dict[TopicPartition, float] = {}  # not fetched since it started
        self._states: Mapping[TopicPartition, PartitionState] = {}  # as `keep_only` last got them
        self.first_fetch_s: float | None = None  # moving average of the waits for a first record
        self._behind_logged = False

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
        waiting_since, started_at = self._waiting_since, self._started_at
        stalled = self._stalled
        for polled in fetched:
            key = polled.key
            waiting_since.pop(key, None)
            if key in started_at:
                self._first_fetch(now - started_at.pop(key))
            if key in stalled:
                self._on_stall(stalled.pop(key), False, now)
        if caught_up:
            return
        fetching = bool(fetched) or not in_flight
        after_s = max(self._after_s, FETCH_STALL_FACTOR * (self.first_fetch_s or 0.0))
        overdue: list[tuple[TopicPartition, PartitionState, int]] = []
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
            since = waiting_since.setdefault(key, started_at.get(key, now))
            if fetching and now - since >= after_s:
                overdue.append((key, state, records))
        if overdue:
            self._pass_over(overdue, states, after_s=after_s, now=now)

    def _pass_over(
        self,
        overdue: list[tuple[TopicPartition, PartitionState, int]],
        states: Mapping[TopicPartition, PartitionState],
        *,
        after_s: float,
        now: float,
    ) -> None:
        """Fetch these again, unless so many of the task's partitions are overdue that the task is behind."""
        waiting_since = self._waiting_since
        late = sum(1 for since in waiting_since.values() if now - since >= after_s)
        if late > max(STALL_MAX_FEW, STALL_MAX_SHARE * len(states)):
            if not self._behind_logged:
                self._behind_logged = True
                log.info(
                    "%s: %d of %d partitions have had no record for %.0f s or more although records wait: "
                    "the task is behind, none is fetched again",
                    self._label,
                    late,
                    len(states),
                    after_s,
                )
            return
        for key, state, records in overdue:
            since = waiting_since.pop(key)
            self._started_at.pop(key, None)  # it waits afresh from now, not from its start
            self.reseek.add(key)
            if key not in self._stalled:
                self._stalled[key] = state
                self._on_stall(state, True, now)
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

    def _first_fetch(self, waited_s: float) -> None:
        average = self.first_fetch_s
        self.first_fetch_s = (
            waited_s if average is None else average + FIRST_FETCH_WEIGHT * (waited_s - average)
        )

    def keep_only(self, states: Mapping[TopicPartition, PartitionState], *, now: float) -> None:
        """The task's partition states changed: a partition gone or started again waits afresh; one
        started now waits for its first record from now."""
        self._waiting_since = {key: since for key, since in self._waiting_since.items() if key in states}
        for key in [key for key in self._stalled if key not in states]:  # gone: its status is not ours
            self._on_stall(self._stalled.pop(key), False, now)
        known, started_at = self._states, self._started_at
        self._started_at = {key: started_at[key] for key in states if key in started_at}
        for key, state in states.items():
            if known.get(key) is not state:  # started (again): not passed over since it started
                self._started_at[key] = now
                self._stalled.pop(key, None)
                # A task of the same flow that ran it before may have said STALL (dedicated mode's tasks
                # share one MirrorMetrics): cleared, a no-op when it was not stalled
                self._on_stall(state, False, now)
        self._states = dict(states)
        self._rotation.reset(list(states))
