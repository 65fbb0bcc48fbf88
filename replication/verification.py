"""Continuous verification: is the target's copy of a source partition the same records, in order?

(Over 600 lines for one reason: the verifier's pure decisions below feed each other in this order, a plan's
ranges into a comparison, its verdicts into a partition's outcome, outcomes into a run's turns, and are
read together; the I/O is elsewhere.)

Pure decisions, no I/O (`replication.kafka.verification_io` reads the records and the offset syncs):

* **what to verify** (`plan_ranges`): ranges of source offsets already replicated *and* covered by an
  offset sync (`verifiable_end`), continuing from where the partition is verified up to, at most
  `hot_records` behind the verifiable end; what is older (cold) is sampled, a few ranges per run;
* **what a record is** (`record_digest`): key, value, headers without ours (the provenance and
  source-offset headers the mirror adds) and the timestamp (when both sides carry CreateTime: a target
  topic with LogAppendTime stamps its own);
* **whether a range matches** (`compare_range`): offsets are exact, so each source record is expected at
  one target offset (the offset syncs' translation). A record there with other content, no record
  there, or a target record in the range that no source record maps to (a rogue producer's write) is a
  mismatch, named by the first differing source offset with both records. Gaps are not mismatches:
  source offsets without a record (compaction, transaction markers, aborted transactions) map to
  nothing, and target offsets without a record (the exactly_once producer's markers) are never read.
  Target records no source record maps to that repeat a source record of the range or of the records
  just after it are the duplicates an at-least-once mirror writes when it restarts (its offset syncs
  rewind past them): not mismatches either;
* **how much it may read** (`ByteBudget`): a bytes/s setting turned into an allowance per run, and for
  how long (`RunClock`);
* **in which order** (`rotation`, `PartitionTurn`): a partition with something new (records replicated and
  synced past its verified part, a mismatch to re-check) gets a turn, never checked or least recently
  checked first, so runs stopped by their budget resume where they stopped; one with nothing new gets
  none (`partition_turn` returns its outcome as it stands) and costs no read.
"""

from __future__ import annotations

import datetime
import hashlib
import random
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from replication.mirroring import SOURCE_OFFSET_HEADER
from replication.policy import PROVENANCE_HEADER
from replication.schemas.wire import schema_id_of, with_schema_id
from replication.topic_partition import partition_label

# Headers the mirror itself adds or rewrites on the target: not part of what is compared.
OUR_HEADERS = frozenset({PROVENANCE_HEADER, SOURCE_OFFSET_HEADER})

Headers = tuple[tuple[str, bytes | None], ...]
K = TypeVar("K")


@dataclass(frozen=True)
class MirroredRecord:
    """One record as read from either cluster. `timestamp_ms` is None when the broker stamped it
    (LogAppendTime): such a timestamp is not the source's and is not compared."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int | None = None
    size: int = 0  # bytes read for it (key + value + headers)

    def as_evidence(self) -> dict:
        """The record for an event and the side-by-side page (bytes shown as text where they are)."""
        return {
            "offset": self.offset,
            "key": _text(self.key),
            "value": _text(self.value),
            "headers": [[name.replace("\x00", "\\x00"), _text(value)] for name, value in self.headers],
            "timestamp_ms": self.timestamp_ms,
        }


def _text(data: bytes | None, limit: int = 2000) -> str | None:
    if data is None:
        return None
    shown = data[:limit]
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        text = "0x" + shown.hex()
    if "\x00" in text:  # text no database stores (PostgreSQL refuses NUL in text and JSON): as bytes
        text = "0x" + shown.hex()
    return text + (f"... ({len(data)} bytes)" if len(data) > limit else "")


def _field(data: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if data is None else struct.pack(">i", len(data)) + data


def record_digest(record: MirroredRecord) -> bytes:
    """sha256 of key, value and headers without ours, in order (the timestamp is compared apart, since
    only CreateTime timestamps are the source's)."""
    digest = hashlib.sha256()
    digest.update(_field(record.key))
    digest.update(_field(record.value))
    for name, value in record.headers:
        if name not in OUR_HEADERS:
            digest.update(_field(name.encode("utf-8")))
            digest.update(_field(value))
    return digest.digest()


def _their_headers(record: MirroredRecord) -> Headers:
    return tuple((name, value) for name, value in record.headers if name not in OUR_HEADERS)


def record_differences(source: MirroredRecord, target: MirroredRecord) -> tuple[str, ...]:
    """The fields by which `target` is not a copy of `source`: key, value, headers (ours aside) and the
    timestamp when both have one; none when it is a copy. The verifier, the drill and the side-by-side page
    judge copies by this one rule."""
    fields = [name for name in ("key", "value") if getattr(source, name) != getattr(target, name)]
    if _their_headers(source) != _their_headers(target):
        fields.append("headers")
    if None not in (source.timestamp_ms, target.timestamp_ms) and source.timestamp_ms != target.timestamp_ms:
        fields.append("timestamp")
    return tuple(fields)


def as_copied(record: MirroredRecord, schema_ids: Mapping[int, int] | None) -> MirroredRecord:
    """The source `record` as a `rewrite-ids` flow copies it: the schema ID its key and value name (the
    wire format) replaced by the target registry's ID of the same schema (`schema_ids`: source -> target,
    as the schema sync found them); unchanged without a map or for an ID the map lacks. What the target's
    copy is compared with: the rewritten ID is the mirror's, not a difference."""
    if not schema_ids:
        return record
    key, value = (_copied_payload(payload, schema_ids) for payload in (record.key, record.value))
    if key is record.key and value is record.value:
        return record
    return replace(record, key=key, value=value)


def _rewritten_id(payload: bytes | None, schema_ids: Mapping[int, int]) -> tuple[int, int] | None:
    """(source ID, target ID) when a `rewrite-ids` flow rewrites the schema ID `payload` names."""
    source_id = schema_id_of(payload)
    target_id = schema_ids.get(source_id) if source_id is not None else None
    if source_id is None or target_id is None or target_id == source_id:
        return None
    return source_id, target_id


def _copied_payload(payload: bytes | None, schema_ids: Mapping[int, int]) -> bytes | None:
    rewritten = _rewritten_id(payload, schema_ids)
    return payload if payload is None or rewritten is None else with_schema_id(payload, rewritten[1])


def rewritten_ids(
    record: MirroredRecord, schema_ids: Mapping[int, int] | None
) -> tuple[tuple[int, int], ...]:
    """The (source, target) schema IDs `as_copied` puts in `record`'s key and value, in that order."""
    found = (_rewritten_id(payload, schema_ids or {}) for payload in (record.key, record.value))
    return tuple(dict.fromkeys(pair for pair in found if pair is not None))


def same_record(source: MirroredRecord, target: MirroredRecord) -> bool:
    """Whether `target` is a copy of `source` (`record_differences`: none)."""
    return not record_differences(source, target)


def range_digest(records: Sequence[MirroredRecord]) -> str:
    """One digest of a range's records in order (contents and comparable timestamps), shown as evidence."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(record_digest(record))
        digest.update(struct.pack(">q", -1 if record.timestamp_ms is None else record.timestamp_ms))
    return digest.hexdigest()


# -- planning ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class OffsetRange:
    """Source offsets [start, end)."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError(f"empty range [{self.start}, {self.end})")


@dataclass(frozen=True)
class VerificationLimits:
    range_records: int = 1000  # source offsets per range
    hot_records: int = 100_000  # continuous verification starts at most this far behind the end
    cold_samples_per_run: int = 1  # ranges sampled per run from older (cold) data

    def __post_init__(self) -> None:
        if self.range_records < 1 or self.hot_records < 1 or self.cold_samples_per_run < 0:
            raise ValueError("range_records and hot_records must be at least 1, cold samples 0 or more")


@dataclass(frozen=True)
class PartitionProgress:
    """What is known of one partition: verified from `verified_from` up to `verified_up_to` (exclusive),
    continuously; `recheck` is the range of an unresolved mismatch."""

    verified_from: int | None = None
    verified_up_to: int | None = None
    recheck: OffsetRange | None = None
    # Where the verified part ends on the target: the next range's target read starts here, so a record
    # another producer wrote between two ranges' copies is read (and found) too.
    target_verified_up_to: int | None = None


@dataclass(frozen=True)
class Plan:
    verified_from: int | None  # where continuous verification starts (kept, or set now)
    ranges: tuple[OffsetRange, ...] = ()  # continuous, in order: each one verified moves verified_up_to
    samples: tuple[OffsetRange, ...] = ()  # cold ranges: verified, counted, never move verified_up_to


def verifiable_end(*, replicated_position: int | None, newest_sync_upstream: int | None) -> int | None:
    """The end (exclusive) of what can be verified now: replicated (before the position) and translated
    exactly (at or before the newest offset sync). None when either is unknown."""
    if replicated_position is None or newest_sync_upstream is None:
        return None
    return min(replicated_position, newest_sync_upstream + 1)


def plan_ranges(
    *,
    progress: PartitionProgress,
    low: int,
    end: int,
    limits: VerificationLimits,
    seed: int = 0,
) -> Plan:
    """The ranges to verify now, in the order to verify them (a byte budget may stop the run early).

    `low` is the first source offset that can be verified: the later of the source's log start and the
    oldest offset sync held (nothing proves where older records went). An unresolved mismatch is
    re-checked alone until it is clean, so `verified_up_to` never passes a mismatch.
    """
    if progress.recheck is not None:
        return Plan(progress.verified_from, (progress.recheck,))
    if end <= low:
        return Plan(progress.verified_from)
    verified_from, start = progress.verified_from, progress.verified_up_to
    if start is None or verified_from is None or start < low or start > end:
        # First run, or retention removed what followed the verified part: start over near the end.
        verified_from = start = max(low, end - limits.hot_records)
    ranges = tuple(
        OffsetRange(offset, min(offset + limits.range_records, end))
        for offset in range(start, end, limits.range_records)
    )
    # Cold samples go with new records: a partition with nothing new costs no read.
    return Plan(verified_from, ranges, _samples(low, verified_from, limits, seed) if ranges else ())


def _samples(low: int, high: int, limits: VerificationLimits, seed: int) -> tuple[OffsetRange, ...]:
    """Ranges drawn from cold data [low, high), reproducibly for a seed."""
    if high <= low or limits.cold_samples_per_run == 0:
        return ()
    draw = random.Random(seed)
    starts = {draw.randrange(low, high) for _ in range(limits.cold_samples_per_run)}
    return tuple(sorted(OffsetRange(s, min(s + limits.range_records, high)) for s in starts))


# A range's bytes (both clusters) per source offset, assumed until a run has read some.
ASSUMED_BYTES_PER_OFFSET = 1000


@dataclass
class ByteBudget:
    """Bytes a run may read: the bytes/s setting times the run interval. A range is only started while
    some allowance is left, so a run overshoots by at most one range. Ranges read together (a round) are
    admitted one by one on their estimated bytes (`estimate`: the bytes per source offset read so far in
    the run), so a round overshoots by at most one range and the estimate's error."""

    allowance: int
    spent: int = 0
    offsets: int = 0  # source offsets of the ranges read

    @classmethod
    def for_run(cls, *, bytes_per_s: float, interval_s: float) -> ByteBudget:
        return cls(int(bytes_per_s * interval_s))

    def spend(self, size: int, *, offsets: int = 0) -> None:
        self.spent += size
        self.offsets += offsets

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.allowance

    def estimate(self, offsets: int) -> int:
        per_offset = self.spent / self.offsets if self.offsets else ASSUMED_BYTES_PER_OFFSET
        return int(offsets * per_offset)

    def admit(self, ranges: Sequence[OffsetRange]) -> int:
        """How many of `ranges` (in order) a round may start: each while some allowance is left after the
        estimates of those before it."""
        planned = self.spent
        for count, offsets in enumerate(ranges):
            if planned >= self.allowance:
                return count
            planned += self.estimate(offsets.end - offsets.start)
        return len(ranges)


def rotation(items: Sequence[K], *, last_checked: Callable[[K], datetime.datetime | None]) -> list[K]:
    """The order a run verifies partitions in: never checked first, then least recently checked (ties in
    the given order), so a run stopped by its budget is resumed by the next where it stopped, and each
    partition with something new comes up within (such partitions) / (partitions a run verifies) runs."""
    return sorted(items, key=lambda item: (last_checked(item) is not None, last_checked(item) or _EPOCH))


_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.UTC)


# -- comparison -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mismatch:
    """The first difference in a range. `source_offset` is the first differing source offset (for a
    target record no source record maps to: the source record that follows it, None past the range)."""

    reason: str  # "content differs", "missing on target", "not on the source"
    source_offset: int | None
    target_offset: int | None
    source: MirroredRecord | None  # as it is on the source (not as copied)
    target: MirroredRecord | None
    # The (source, target) schema IDs of `source` a `rewrite-ids` flow rewrites: it was compared as copied.
    compared_as_copied: tuple[tuple[int, int], ...] = ()

    def message(self, *, topic: str, partition: int, remote_topic: str) -> str:
        said = self._said(topic=topic, partition=partition, remote_topic=remote_topic)
        if not self.compared_as_copied:
            return said
        ids = ", ".join(f"{source} -> {target}" for source, target in self.compared_as_copied)
        return f"{said} (compared as copied: schema ID {ids} rewritten)"

    def _said(self, *, topic: str, partition: int, remote_topic: str) -> str:
        where = partition_label(topic, partition)
        if self.reason == "not on the source":
            before = (
                ""
                if self.source_offset is None
                else f", before the copy of source offset {self.source_offset}"
            )
            return (
                f"{remote_topic}[{partition}] offset {self.target_offset} holds a record that is not on the "
                f"source {where}{before}: written by another producer"
            )
        if self.reason == "missing on target":
            return (
                f"{where} offset {self.source_offset} is missing on the target "
                f"(expected at {remote_topic}[{partition}] offset {self.target_offset})"
            )
        return (
            f"{where} offset {self.source_offset} differs from its copy at "
            f"{remote_topic}[{partition}] offset {self.target_offset}"
        )


@dataclass(frozen=True)
class RangeVerdict:
    range: OffsetRange
    source_count: int
    target_count: int  # target records the source records map to
    duplicates: int  # target records that repeat source records (at-least-once restarts)
    source_digest: str
    target_digest: str
    bytes_read: int
    mismatch: Mismatch | None = None
    target_end: int | None = None  # translate(range end): where the next range's target read starts

    @property
    def clean(self) -> bool:
        return self.mismatch is None


def compare_range(
    *,
    offsets: OffsetRange,
    source: Sequence[MirroredRecord],
    target: Sequence[MirroredRecord],
    translate: Callable[[int], int | None],
    lookahead: Sequence[MirroredRecord] = (),
    target_end: int | None = None,
    schema_ids: Mapping[int, int] | None = None,
) -> RangeVerdict:
    """Compare the source records of `offsets` with the target records read over their translation
    [translate(start), translate(end)).

    `translate` is the offset syncs' exact upstream -> downstream translation; `lookahead` are the source
    records right after the range (as many as the target has unmapped records), so the duplicates a
    restarted at-least-once mirror wrote are told from foreign records. `schema_ids`: a `rewrite-ids`
    flow's source -> target schema IDs: each source record is compared as copied (`as_copied`), and a
    mismatch holds it as it is on the source, naming the IDs rewritten for the comparison.
    """
    originals = {record.offset: record for record in source}

    def mismatch(reason: str, record: MirroredRecord | None, at: int | None, copy: MirroredRecord | None):
        """The mismatch with the source record as it is on the source, saying it was compared as copied."""
        original = None if record is None else originals[record.offset]
        return Mismatch(
            reason,
            None if record is None else record.offset,
            at,
            original,
            copy,
            () if original is None else rewritten_ids(original, schema_ids),
        )

    source = [as_copied(record, schema_ids) for record in source]
    lookahead = [as_copied(record, schema_ids) for record in lookahead]
    by_offset = {record.offset: record for record in target}
    expected: list[tuple[MirroredRecord, int | None]] = [(r, translate(r.offset)) for r in source]
    mapped = {at for _, at in expected if at is not None}
    known = {record_digest(r) for r in (*source, *lookahead)}
    candidates: list[tuple[int, int, Mismatch]] = []  # (source offset order, tie, mismatch)
    matched: list[MirroredRecord] = []
    for record, at in expected:
        copy = by_offset.get(at) if at is not None else None
        if copy is None:
            candidates.append((record.offset, 1, mismatch("missing on target", record, at, None)))
            break
        matched.append(copy)
        if not same_record(record, copy):
            candidates.append((record.offset, 1, mismatch("content differs", record, at, copy)))
            break
    duplicates = 0
    for record in target:
        if record.offset in mapped:
            continue
        if record_digest(record) in known:
            duplicates += 1
            continue
        following = next((r for r, at in expected if at is not None and at > record.offset), None)
        order = following.offset if following is not None else offsets.end
        candidates.append((order, 0, mismatch("not on the source", following, record.offset, record)))
        break
    first = min(candidates, key=lambda c: (c[0], c[1]))[2] if candidates else None
    return RangeVerdict(
        range=offsets,
        source_count=len(source),
        target_count=len(matched),
        duplicates=duplicates,
        source_digest=range_digest(source),
        target_digest=range_digest(matched),
        bytes_read=sum(r.size for r in (*source, *target, *lookahead)),
        mismatch=first,
        target_end=target_end,
    )


# -- one partition's run ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionOutcome:
    """What one run found for one partition (counts are this run's, added to the stored ones)."""

    topic: str
    partition: int
    remote_topic: str
    status: str  # pending, ok, mismatch, unverifiable
    reason: str = ""
    verified_from: int | None = None
    verified_up_to: int | None = None
    target_verified_up_to: int | None = None
    recheck: OffsetRange | None = None  # the range of the mismatch, checked again next run
    mismatch: Mismatch | None = None
    records_verified: int = 0
    ranges_verified: int = 0
    ranges_sampled: int = 0
    bytes_read: int = 0
    last_digest: str = ""
    sync: tuple[int, int] | None = None  # the newest offset sync (upstream, downstream)
    verified_clean: bool = False  # some range was verified clean in this run
    checked: bool = False  # the run read (or tried to read) the partition: its turn in the rotation is over


def fold_verdicts(
    *,
    topic: str,
    partition: int,
    remote_topic: str,
    progress: PartitionProgress,
    plan: Plan,
    hot: Sequence[RangeVerdict],
    samples: Sequence[RangeVerdict],
    sync: tuple[int, int] | None,
    checked: bool = False,
) -> PartitionOutcome:
    """The partition's new state after verifying (a prefix of) the plan's ranges in order.

    `verified_up_to` moves over the continuous ranges verified clean, up to the first mismatch, which is
    kept to re-check; a clean re-check resolves it (a re-check the budget or an unreadable end put off
    leaves the mismatch as it was, `mismatch` None). A mismatch in a cold sample is a mismatch too.
    """
    verified_up_to, target_up_to = progress.verified_up_to, progress.target_verified_up_to
    if plan.verified_from != progress.verified_from:  # started (over) at plan.verified_from
        verified_up_to, target_up_to = plan.verified_from, None
    mismatch: RangeVerdict | None = None
    for verdict in hot:
        if not verdict.clean:
            mismatch = verdict
            break
        if verified_up_to is not None and verdict.range.start <= verified_up_to < verdict.range.end:
            verified_up_to, target_up_to = verdict.range.end, verdict.target_end
    mismatch = mismatch or next((v for v in samples if not v.clean), None)
    verdicts = [*hot, *samples]
    clean = [v for v in verdicts if v.clean]
    last = verdicts[-1].source_digest if verdicts else ""
    ok = PartitionOutcome(
        topic=topic,
        partition=partition,
        remote_topic=remote_topic,
        status="ok",
        verified_from=plan.verified_from,
        verified_up_to=verified_up_to,
        target_verified_up_to=target_up_to,
        records_verified=sum(v.source_count for v in clean),
        ranges_verified=sum(1 for v in hot if v.clean),
        ranges_sampled=sum(1 for v in samples if v.clean),
        bytes_read=sum(v.bytes_read for v in verdicts),
        last_digest=last,
        sync=sync,
        verified_clean=bool(clean),
        checked=checked,
    )
    if progress.recheck is not None and not hot:  # not re-checked this run: still a mismatch
        return replace(ok, status="mismatch", recheck=progress.recheck)
    if mismatch is not None and (found := mismatch.mismatch) is not None:
        return replace(
            ok,
            status="mismatch",
            reason=found.message(topic=topic, partition=partition, remote_topic=remote_topic),
            recheck=mismatch.range,
            mismatch=found,
        )
    if verified_up_to is None:
        return replace(ok, status="pending", reason="nothing replicated and synced to verify yet")
    return ok


# -- one run: every partition planned, those with something new verified in turns -------------------------
@dataclass(frozen=True)
class PartitionEnds:
    """One partition's offsets as this run's batched ListOffsets requests found them."""

    log_start: int  # the source partition's
    source_end: int  # the source partition's readable end (last stable offset)
    target_end: int | None  # the remote partition's readable end; None when it was not listed


@dataclass
class PartitionTurn:
    """One partition's turn in a run: its plan's ranges verified one per round (the continuous ones in
    order, then the cold samples), each kind up to its first mismatch or a range put off (not readable
    yet, a slow read), while the run's budgets last."""

    topic: str
    partition: int
    remote_topic: str
    progress: PartitionProgress
    plan: Plan
    sync: tuple[int, int] | None
    ends: PartitionEnds
    hot: list[RangeVerdict] = field(default_factory=list)
    samples: list[RangeVerdict] = field(default_factory=list)
    checked: bool = False  # some range was read or put off: the turn happened

    def __post_init__(self) -> None:
        continuing = self.plan.verified_from == self.progress.verified_from
        self._hot_left = list(self.plan.ranges)
        self._samples_left = list(self.plan.samples)
        self._verified_up_to = self.progress.verified_up_to if continuing else None
        self._target_from = self.progress.target_verified_up_to if continuing else None

    def next_range(self) -> tuple[OffsetRange, int | None] | None:
        """The range to verify next, with where its target read starts when it continues the verified
        part (None: at the translation of its start); None once the turn is over."""
        if self._hot_left:
            offsets = self._hot_left[0]
            return offsets, self._target_from if offsets.start == self._verified_up_to else None
        return (self._samples_left[0], None) if self._samples_left else None

    def readable(self, offsets: OffsetRange, target_end: int | None) -> bool:
        """Whether both sides' readable ends (listed this run) reach the range (`target_end`: its
        translated end): a range past them is put off without a read."""
        on_target = target_end is None or self.ends.target_end is None or target_end <= self.ends.target_end
        return offsets.end <= self.ends.source_end and on_target

    @property
    def records_left(self) -> int:
        """Source offsets of its continuous ranges no round verified (the run's budgets ran out first);
        none after a mismatch or a range put off (replication, not the verifier, is behind then)."""
        return sum(offsets.end - offsets.start for offsets in self._hot_left)

    def put_off(self) -> None:
        """The next range cannot be verified this run: neither can the ranges of its kind after it."""
        self.checked = True
        (self._hot_left if self._hot_left else self._samples_left).clear()

    def record(self, verdict: RangeVerdict) -> None:
        self.checked = True
        if self._hot_left:
            self._hot_left.pop(0)
            self.hot.append(verdict)
            self._verified_up_to, self._target_from = verdict.range.end, verdict.target_end
            left = self._hot_left
        else:
            self._samples_left.pop(0)
            self.samples.append(verdict)
            left = self._samples_left
        if not verdict.clean:
            left.clear()

    def outcome(self) -> PartitionOutcome:
        return fold_verdicts(
            topic=self.topic,
            partition=self.partition,
            remote_topic=self.remote_topic,
            progress=self.progress,
            plan=self.plan,
            hot=self.hot,
            samples=self.samples,
            sync=self.sync,
            checked=self.checked,
        )


def partition_turn(
    *,
    topic: str,
    partition: int,
    remote_topic: str,
    progress: PartitionProgress,
    replicated_position: int | None,
    newest_sync: tuple[int, int] | None,
    oldest_sync_upstream: int | None,
    ends: PartitionEnds,
    limits: VerificationLimits,
    seed: int,
) -> PartitionTurn | PartitionOutcome:
    """The partition's turn when it has something to verify (new records, a mismatch to re-check), else
    its outcome as it stands (nothing to read)."""
    end = verifiable_end(
        replicated_position=replicated_position,
        newest_sync_upstream=newest_sync[0] if newest_sync else None,
    )
    if end is None or oldest_sync_upstream is None:
        reason = "no offset sync read yet" if newest_sync is None else "no replicated position yet"
        return PartitionOutcome(topic, partition, remote_topic, "unverifiable", reason, sync=newest_sync)
    low = max(oldest_sync_upstream, ends.log_start)
    plan = plan_ranges(progress=progress, low=low, end=end, limits=limits, seed=seed)
    turn = PartitionTurn(topic, partition, remote_topic, progress, plan, newest_sync, ends)
    return turn if plan.ranges else turn.outcome()


@dataclass
class RunClock:
    """A run's time budget: batches of partitions and rounds start only before the deadline, except the
    run's first, so every run verifies something."""

    deadline: float
    started: bool = False

    def may_start(self, now: float) -> bool:
        return not self.started or now < self.deadline

    def start(self) -> None:
        self.started = True
