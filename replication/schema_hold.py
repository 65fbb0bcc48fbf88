"""The schema hold (`rewrite-ids`, `keep-ids`): a partition whose next record names a schema the target
registry does not hold yet stays at that record (never sent with a wrong ID, nothing after it sent), the
task's other partitions go on, and the hold becomes a `schema` error once it lasted `SCHEMA_WAIT_ERROR_S`.

A held partition counts as behind (its metrics are reported every slice, `replication.task_metrics`); it
is released once its record at the held offset is sent. Time is passed in (or read from `clock`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from replication.partition_state import PartitionState
from replication.slices import SliceError, SliceErrorKind
from replication.task_io import SchemaWait
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

# A partition holding at a record whose schema the target registry lacks is an error (in the flow's
# status) once it waited this long: the schema sync runs every few seconds when it works.
SCHEMA_WAIT_ERROR_S = 30.0


class SchemaHold:
    """The partitions of one task held at a record, and since when (kept across slices)."""

    def __init__(
        self, *, clock: Callable[[], float], label: str, error_after_s: float = SCHEMA_WAIT_ERROR_S
    ) -> None:
        self._clock, self._label, self._error_after_s = clock, label, error_after_s
        self.held: dict[TopicPartition, PartitionState] = {}
        # A partition was held since the task last looked: the source fetched past the held record and
        # must fetch it again from there.
        self.reseek: set[TopicPartition] = set()

    def retry(self) -> None:
        """A slice begins: every held partition tries its record again (the schema sync may have
        registered it meanwhile)."""
        for state in self.held.values():
            state.schema_wait = None

    def hold(self, state: PartitionState, offset: int, wait: SchemaWait) -> None:
        """The partition stays at `offset` (fetched again from there) because its record waits for a
        schema: its other records fetched with it wait as well."""
        state.schema_wait = wait
        state.next_offset = offset
        state.held = (offset, wait)
        self.held[state.key] = state
        self.reseek.add(state.key)
        if state.schema_wait_since is None:
            state.schema_wait_since = self._clock()
            log.info(
                "%s: %s[%d] waits at offset %d: %s", self._label, state.topic, state.partition, offset, wait
            )

    def check(self, *, now: float) -> list[SliceError]:
        """Release the partitions whose held record was sent (their position moved past it) or that
        stopped; the others that held `error_after_s` are errors. A slice that did not fetch a held
        partition again (a seek takes a fetch to apply) keeps its hold and its clock, so the error comes
        `error_after_s` after the hold began whatever the slices."""
        errors = []
        for key, state in list(self.held.items()):
            assert state.held is not None and state.schema_wait_since is not None
            offset, wait = state.held
            if state.schema_wait is None and (state.position > offset or state.stopped):
                state.schema_wait_since, state.held = None, None
                del self.held[key]
            elif now - state.schema_wait_since >= self._error_after_s:
                errors.append(
                    SliceError(
                        SliceErrorKind.SCHEMA,
                        f"{state.topic}[{state.partition}] has waited {now - state.schema_wait_since:.0f}s "
                        f"at offset {offset}: {state.schema_wait or wait}",
                        key,
                    )
                )
        return errors
