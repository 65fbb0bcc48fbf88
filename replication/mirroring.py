"""The MM2 decisions of a `MirrorSourceTask`, as pure functions of their inputs (no I/O, time passed in).

- **Header rewrite and provenance** (`header_rewriter`): what a mirrored record carries besides the source
  record's own headers, and which records must not be mirrored (they came from the target: a loop).
- **When to emit an offset sync**: `replication.offset_syncs.OffsetSyncWriter`, fed with acknowledged
  (upstream, downstream) pairs.
- **Data-loss handling** (`detect_data_loss`, `gap_event`): whether the next source offset is gone, and
  what `data.loss.policy` makes of it.
- **The exactly_once resume point** (`source_offsets`, `reread_start`, `resume_point`): the source offsets
  a remote partition's records carry, and where a partition resumes after a crash, from what its remote
  partition already holds; `waits_for_remote_partition`: whether a partition
  whose remote partition the target does not know yet waits for it or fails to start.

The task (`replication.source`) runs them; tested without a broker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from replication.config import DataLossPolicy
from replication.metrics import GapEvent
from replication.policy import has_visited, provenance_after_hop
from replication.task_io import Headers, Record, Tail

SOURCE_OFFSET_HEADER = "mirrorplane.source-offset"
_OFFSET = struct.Struct(">q")
pack_source_offset = _OFFSET.pack  # the header's value: 8 bytes, big-endian
SKIP: Final = object()  # a header rewriter's answer for a record that must not be replicated


def source_offset_of(headers: Headers) -> int | None:
    """The source offset a mirrored record carries (the last such header: ours is appended last)."""
    for key, value in reversed(headers or ()):
        if key == SOURCE_OFFSET_HEADER and value is not None and len(value) == _OFFSET.size:
            return _OFFSET.unpack(value)[0]
    return None


def with_source_offset(headers: Headers, offset: int) -> Headers:
    """The record's headers with `mirrorplane.source-offset` appended (exactly_once)."""
    return [*(headers or ()), (SOURCE_OFFSET_HEADER, pack_source_offset(offset))]


def source_offsets(headers: Sequence[Headers]) -> list[int | None]:
    """The source offset of each of a remote partition's records, read in order (`read_committed`), from
    their headers. In Kafka transactions a task writes the header only on the first and the last record
    of each run (a partition's consecutive source offsets in one fetched batch) and on every record where
    provenance or schema IDs may skip or hold one (`replication.delivery`): a record without it between
    two that carry it is the one after the record before it, when their source offsets are as far apart
    as the records (no other writer's record between them). Otherwise, and before the first header or
    after the last one, None: not a record this mirror is known to have written."""
    marked = [source_offset_of(each) for each in headers]
    found = list(marked)
    before: int | None = None  # index of the last record that carries its header
    for index, upstream in enumerate(marked):
        if upstream is None:
            continue
        if before is not None and index - before > 1:
            first = marked[before]
            assert first is not None
            if upstream - first == index - before:
                found[before + 1 : index] = range(first + 1, upstream)
        before = index
    return found


def header_rewriter(
    *, provenance_enabled: bool, exactly_once: bool, source_alias: str, target_alias: str
) -> Callable[[Headers, int], Headers | object] | None:
    """Headers to write for a record at a source offset, or SKIP; None when headers pass through as-is."""
    if not provenance_enabled:
        return with_source_offset if exactly_once else None

    def rewrite(headers: Headers, offset: int) -> Headers | object:
        if has_visited(headers, cluster_alias=target_alias):
            return SKIP  # it came from the target: replicating it back would loop
        headers = provenance_after_hop(headers, source_alias=source_alias)
        return with_source_offset(headers, offset) if exactly_once else headers

    return rewrite


@dataclass(frozen=True)
class DataLoss:
    resumed_offset: int
    lost_records: int | None  # None: unknowable (the partition's end went below the position)
    reason: str

    def describe(self, topic: str, partition: int) -> str:
        lost = "an unknown number of" if self.lost_records is None else str(self.lost_records)
        return f"data loss on {topic}[{partition}]: {lost} records never replicated; {self.reason}"


def detect_data_loss(*, expected_offset: int, earliest_offset: int, end_offset: int) -> DataLoss | None:
    """Whether the next offset to replicate is gone from the source, and where replication can go on."""
    if earliest_offset > expected_offset:
        return DataLoss(
            earliest_offset,
            earliest_offset - expected_offset,
            f"offsets {expected_offset}..{earliest_offset - 1} were deleted (retention) before replication",
        )
    if end_offset < expected_offset:
        return DataLoss(
            earliest_offset,
            None,
            f"the partition ends at {end_offset}, below the next offset {expected_offset} "
            "(topic recreated or truncated); records past the position are gone unseen",
        )
    return None


def gap_event(
    loss: DataLoss, *, topic: str, partition: int, expected_offset: int, policy: DataLossPolicy, now: float
) -> GapEvent:
    """The gap as reported: `stop` keeps the partition at `expected_offset` (its resumed offset), `skip`
    resumes at the earliest offset there is."""
    stop = policy == DataLossPolicy.STOP
    return GapEvent(
        topic=topic,
        partition=partition,
        expected_offset=expected_offset,
        resumed_offset=expected_offset if stop else loss.resumed_offset,
        lost_records=loss.lost_records,
        detected_at=now,
        reason=loss.reason,
    )


def gap_suspected(
    *, watermarks: tuple[int, int] | None, next_offset: int, suspect_since: float | None, now: float
) -> float | None:
    """Since when an idle partition's fetched watermarks exclude its next offset; None while they do not
    (or are unknown). The task checks for data loss once that lasted its confirmation time."""
    if watermarks is None or watermarks[0] <= next_offset <= watermarks[1]:
        return None
    return now if suspect_since is None else suspect_since


def reread_start(*, stored: int, tail: Tail) -> int | None:
    """exactly_once: the remote offset from which records written after the stored position `stored` are
    re-read (to resume after them and re-derive their offset syncs); None when it holds none. The last
    record a task writes to a partition carries its source offset (`source_offsets`).

    Each source record is at most one remote record, and in transactions each record is followed by at
    most one commit marker, so source offsets [stored, last] lie in the last 2 x (last - stored + 1)
    remote offsets: reading from there reaches the record at `stored`, which carries its header (a stored
    position is where a transaction's run began), and every record after it is placed."""
    last_source_offset = source_offset_of(tail.last[1]) if tail.last else None
    if tail.last is None or last_source_offset is None or last_source_offset < stored:
        return None
    return max(tail.low, tail.last[0] - 2 * (last_source_offset - stored))


def resume_point(*, stored: int, written: Sequence[Record]) -> tuple[int, list[tuple[int, int]]]:
    """exactly_once: where a partition resumes, given the remote records read from `reread_start`, and
    the (upstream, downstream) pairs they acknowledge (offset syncs a crash may have prevented).

    The remote partition holds a prefix of what was sent (gapless producer, one writer), so resuming right
    after the last source offset found there neither skips nor repeats a record."""
    next_offset = stored
    acknowledged: list[tuple[int, int]] = []
    upstreams = source_offsets([headers for _, headers in written])
    for (downstream, _), upstream in zip(written, upstreams, strict=True):
        if upstream is not None and upstream >= stored:
            acknowledged.append((upstream, downstream))
            next_offset = upstream + 1
    return next_offset, acknowledged


def waits_for_remote_partition(
    *, unknown_partition: bool, waiting_since: float, now: float, wait_s: float
) -> bool:
    """A partition that cannot start because the target does not know its remote partition waits for it
    (retried each slice, no error) for `wait_s` from its first such failure: the flow's plan lists a remote
    topic as soon as the target has created it, before every broker and the task's cached client metadata
    know it. Any other failure (a cluster that does not answer), or a longer wait (the topic deleted, a
    partition left without a leader), is an error."""
    return unknown_partition and now - waiting_since < wait_s
