"""Where a `MirrorSourceTask`'s partitions start, all of a slice's together (one batched read of their
stored positions, earliest offsets and remote tails, never one request per partition).

A partition starts at its stored position, or at the earliest source offset when it was never
replicated. exactly_once: it resumes right after the last source offset its remote partition holds
(`replication.mirroring.resume_point`), re-deriving the offset syncs of the records written after the
stored position, which a crash may have prevented. A partition whose remote partition the target does
not know yet (just created) waits for it, retried each slice, for `wait_s` before its start is an error
(`waits_for_remote_partition`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping

from replication.config import FlowConfig
from replication.mirroring import reread_start, resume_point, waits_for_remote_partition
from replication.partition_state import Acknowledgements, PartitionState
from replication.positions import PositionWriter
from replication.task_io import PartitionReadError, Readers
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

# exactly_once: a partition whose remote partition the target does not know yet (just created) waits for
# it this long, retried each slice, before its start is an error (`waits_for_remote_partition`). Well
# under the time a chain stays on one worker (60 slices of 1 s): a task built elsewhere waits anew.
REMOTE_PARTITION_WAIT_S = 30.0
LOGGED = 20  # partitions named in a line about a topic's partitions (started, waiting): not all 5,000

StartFailures = dict[TopicPartition, PartitionReadError]


class PartitionStarter:
    """One task's partition starts, and the partitions that wait for their remote partition (since when)."""

    def __init__(
        self,
        *,
        flow: FlowConfig,
        positions: PositionWriter,
        acks: Acknowledgements,
        readers: Readers,
        wait_s: float,
        clock: Callable[[], float],
        label: str,
    ) -> None:
        self._flow, self._positions, self._acks, self._readers = flow, positions, acks, readers
        self._wait_s, self._clock, self._label = wait_s, clock, label
        self.awaiting_remote: dict[TopicPartition, float] = {}  # partition -> when it began to wait (clock)

    def keep_awaiting(self, assigned: set[TopicPartition]) -> None:
        self.awaiting_remote = {key: t for key, t in self.awaiting_remote.items() if key in assigned}

    def from_positions(
        self, remote_topics: Mapping[TopicPartition, str], resume: Mapping[TopicPartition, int]
    ) -> tuple[dict[TopicPartition, PartitionState], StartFailures]:
        """The states of these partitions from `resume` (restarted alone: their failed record), or their
        stored positions (or earliest offsets), and the partitions whose earliest offset could not be read."""
        keys = list(remote_topics)
        starts = self._positions.load([key for key in keys if key not in resume])
        starts.update({key: resume[key] for key in keys if key in resume})
        failures: StartFailures = {}
        if len(starts) < len(keys):  # never replicated: start at the earliest source offset
            earliest, failures = self._readers.source().watermarks_all([k for k in keys if k not in starts])
            starts.update({key: low for key, (low, _) in earliest.items()})
        states = {
            key: PartitionState(
                topic=key[0],
                partition=key[1],
                remote_topic=remote_topics[key],
                start=starts[key],
                offset_lag_max=self._flow.offset_lag_max,
                acks=self._acks,
            )
            for key in keys
            if key in starts
        }
        return states, failures

    def from_target(
        self, states: dict[TopicPartition, PartitionState], remote_topics: Mapping[TopicPartition, str]
    ) -> StartFailures:
        """exactly_once: each state moved after what its remote partition holds. The partitions that wait
        for their remote partition leave `states` without an error; those that fail are returned."""
        failures = self._recover(states)
        waiting = self._waiting(failures, remote_topics)
        for key in waiting:
            states.pop(key, None)
        return {key: exc for key, exc in failures.items() if key not in waiting}

    def defer(
        self,
        states: dict[TopicPartition, PartitionState],
        unready: set[TopicPartition],
        remote_topics: Mapping[TopicPartition, str],
    ) -> None:
        """The partitions whose remote partition the producer does not see with a leader yet
        (`Delivery.warm`) wait for it as a missing remote partition does, retried each slice; past the
        wait they start anyway (their records wait in the producer)."""
        failures = {
            key: PartitionReadError(
                f"the producer does not see {remote_topics[key]}[{key[1]}] with a leader yet",
                unknown_partition=True,
            )
            for key in unready
        }
        for key in self._waiting(failures, remote_topics):
            states.pop(key, None)

    def started(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """These partitions start replicating: logged, one line per topic (not per partition)."""
        started: dict[tuple[str, str], list[str]] = defaultdict(list)
        for key, state in states.items():
            self.awaiting_remote.pop(key, None)
            state.persisted = self._positions.known.get(key)
            started[(state.topic, state.remote_topic)].append(f"{state.partition}@{state.next_offset}")
        for (topic, remote_topic), partitions in started.items():
            log.info(
                "%s: replicating %s -> %s, %d partition(s) from (partition@offset) %s",
                self._label,
                topic,
                remote_topic,
                len(partitions),
                _first(partitions, sep=" "),
            )

    def _recover(self, states: Mapping[TopicPartition, PartitionState]) -> StartFailures:
        """All partitions' tails and rereads are read together; the ones that fail are returned."""
        reader = self._readers.target()
        by_remote = {(state.remote_topic, state.partition): state for state in states.values()}
        tails, failures = reader.tails(list(by_remote))
        rereads: dict[TopicPartition, int] = {}
        for remote, tail in tails.items():
            start = reread_start(stored=by_remote[remote].next_offset, tail=tail)
            if start is not None:
                rereads[remote] = start
        written, reread_failures = reader.read_all_to_end(rereads)
        failures.update(reread_failures)
        for remote, records in written.items():
            state = by_remote[remote]
            stored = state.next_offset
            state.next_offset, acknowledged = resume_point(stored=stored, written=records)
            for upstream, downstream in acknowledged:
                state.syncs.on_ack(upstream, downstream)
            log.info(
                "flow %s: %s[%d] already holds source offsets up to %d: resuming at %d (stored %d)",
                self._flow.name,
                *remote,
                state.next_offset - 1,
                state.next_offset,
                stored,
            )
        return {(by_remote[remote].topic, remote[1]): exc for remote, exc in failures.items()}

    def _waiting(
        self,
        failures: Mapping[TopicPartition, PartitionReadError],
        remote_topics: Mapping[TopicPartition, str],
    ) -> set[TopicPartition]:
        """The partitions of `failures` that wait for their remote partition: no error, retried next slice,
        logged at INFO when they begin to wait. The others are start errors."""
        now = self._clock()
        waiting: set[TopicPartition] = set()
        begun: dict[str, list[int]] = defaultdict(list)
        for key, exc in failures.items():
            if exc.unknown_partition and key not in self.awaiting_remote:
                self.awaiting_remote[key] = now
                begun[remote_topics[key]].append(key[1])
            if waits_for_remote_partition(
                unknown_partition=exc.unknown_partition,
                waiting_since=self.awaiting_remote.get(key, now),
                now=now,
                wait_s=self._wait_s,
            ):
                waiting.add(key)
        for remote_topic, partitions in begun.items():
            log.info(
                "%s: waiting for remote topic %s to be created (partitions %s); retried each slice",
                self._label,
                remote_topic,
                _first([str(p) for p in sorted(partitions)], sep=", "),
            )
        return waiting


def _first(named: list[str], *, sep: str) -> str:
    """The first `LOGGED` of `named`, and how many more: a log line does not grow with the partitions."""
    more = len(named) - LOGGED
    return sep.join(named[:LOGGED]) + (f" ... and {more} more" if more > 0 else "")
