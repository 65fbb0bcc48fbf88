"""OffsetSyncStore: exact translation, checked against a simulated mirror with gaps and rewinds."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.formats import OffsetSync
from replication.offset_sync_store import OffsetSyncStore

TOPIC = "orders"


@dataclass(frozen=True)
class Mirror:
    """What a mirror did to one partition: every write (upstream offset, downstream offset) in order."""

    upstream_offsets: tuple[int, ...]  # records that exist upstream
    writes: tuple[tuple[int, int], ...]
    downstream_end: int  # next downstream offset (after any trailing marker)

    def next_upstream_record(self, offset: int) -> int | None:
        return next((u for u in self.upstream_offsets if u >= offset), None)

    def first_write_from(self, downstream_offset: int) -> tuple[int, int] | None:
        return next(((u, d) for u, d in self.writes if d >= downstream_offset), None)


def emitted_syncs(writes, *, offset_lag_max: int) -> list[OffsetSync]:
    """MirrorSourceTask's rule: first record, every change of (upstream - downstream), offset.lag.max,
    and a progress sync of the newest acknowledged pair."""
    syncs: list[OffsetSync] = []
    previous = None
    for upstream, downstream in writes:
        changed = previous is None or upstream - downstream != previous[0] - previous[1]
        drifted = syncs and downstream - syncs[-1].downstream_offset >= offset_lag_max
        if changed or drifted:
            syncs.append(OffsetSync(TOPIC, 0, upstream, downstream))
        previous = (upstream, downstream)
    if previous != (syncs[-1].upstream_offset, syncs[-1].downstream_offset):
        syncs.append(OffsetSync(TOPIC, 0, *previous))
    return syncs


@st.composite
def mirrors(draw) -> Mirror:
    """Upstream offsets with skips (compaction, markers), downstream skips (markers), and rewinds
    (a crashed at-least-once mirror that re-sends from an earlier record)."""
    count = draw(st.integers(min_value=1, max_value=60))
    upstream_skips = draw(st.lists(st.sampled_from([0, 0, 0, 1, 3, 17]), min_size=count, max_size=count))
    offsets, position = [], draw(st.integers(min_value=0, max_value=5))
    for skip in upstream_skips:
        position += skip
        offsets.append(position)
        position += 1
    writes, downstream, index = [], draw(st.integers(min_value=0, max_value=3)), 0
    while index < count and len(writes) < 4 * count:
        downstream += draw(st.sampled_from([0, 0, 0, 0, 1, 2]))
        writes.append((offsets[index], downstream))
        downstream += 1
        rewind = draw(st.integers(min_value=0, max_value=25)) == 25
        index = draw(st.integers(min_value=0, max_value=index)) if rewind else index + 1
    writes.extend((offsets[i], downstream + i - index) for i in range(index, count))
    downstream += count - index
    trailing_marker = draw(st.sampled_from([0, 0, 1]))
    return Mirror(tuple(offsets), tuple(writes), downstream + trailing_marker)


def store_for(mirror: Mirror, *, offset_lag_max: int) -> OffsetSyncStore:
    store = OffsetSyncStore()
    store.update_all(emitted_syncs(mirror.writes, offset_lag_max=offset_lag_max))
    return store


@settings(max_examples=400, deadline=None)
@given(mirror=mirrors(), offset_lag_max=st.sampled_from([1, 5, 100]))
def test_every_committed_offset_resumes_at_exactly_the_next_record(mirror: Mirror, offset_lag_max: int):
    store = store_for(mirror, offset_lag_max=offset_lag_max)
    first = mirror.upstream_offsets[0]
    for committed in range(first, mirror.upstream_offsets[-1] + 3):
        translated = store.translate_downstream(TOPIC, 0, committed)
        assert translated is not None
        assert translated <= mirror.downstream_end
        sync = store.sync_used(TOPIC, 0, committed)  # what the offset mapping API shows
        assert sync is not None and sync.upstream_offset <= committed
        assert translated <= sync.downstream_offset + (committed - sync.upstream_offset)
        next_record = mirror.next_upstream_record(committed)
        resumed_at = mirror.first_write_from(translated)
        if next_record is None:
            assert resumed_at is None, (committed, translated)
        else:
            assert resumed_at is not None and resumed_at[0] == next_record, (committed, translated)


@settings(max_examples=200, deadline=None)
@given(mirror=mirrors())
def test_offsets_below_the_oldest_sync_are_not_translated(mirror: Mirror):
    store = store_for(mirror, offset_lag_max=100)
    oldest = store.oldest_upstream_offset(TOPIC, 0)
    assert oldest == min(u for u, _ in mirror.writes)
    for committed in range(max(oldest - 3, 0), oldest):
        assert store.translate_downstream(TOPIC, 0, committed) is None


def test_gap_offsets_resume_at_the_record_after_the_gap():
    # Upstream 0..9 then 20..29 (compaction removed 10..19); downstream contiguous from 0.
    store = OffsetSyncStore()
    store.update(OffsetSync(TOPIC, 0, 0, 0))
    store.update(OffsetSync(TOPIC, 0, 20, 10))
    assert store.translate_downstream(TOPIC, 0, 5) == 5
    assert store.translate_downstream(TOPIC, 0, 10) == 10
    assert store.translate_downstream(TOPIC, 0, 19) == 10  # never past the next sync
    assert store.translate_downstream(TOPIC, 0, 20) == 10
    # Past the newest sync, only its own record is proven to be on the target.
    assert store.translate_downstream(TOPIC, 0, 25) == 11


def test_past_the_newest_sync_translation_is_one_past_it_until_progress_is_synced():
    store = OffsetSyncStore()
    store.update(OffsetSync(TOPIC, 0, 100, 0))
    assert store.translate_downstream(TOPIC, 0, 100) == 0
    assert store.translate_downstream(TOPIC, 0, 150) == 1
    store.update(OffsetSync(TOPIC, 0, 160, 60))  # progress: same difference, the mirror reached 160
    assert store.translate_downstream(TOPIC, 0, 150) == 50
    assert store.translate_downstream(TOPIC, 0, 170) == 61


@settings(max_examples=300, deadline=None)
@given(mirror=mirrors(), data=st.data())
def test_syncs_not_read_yet_never_make_a_consumer_skip_records(mirror: Mirror, data):
    """The store may lag the mirror (syncs follow acks): every record at or after `c` is still read."""
    syncs = emitted_syncs(mirror.writes, offset_lag_max=100)
    store = OffsetSyncStore()
    store.update_all(syncs[: data.draw(st.integers(min_value=1, max_value=len(syncs)))])
    for committed in range(mirror.upstream_offsets[0], mirror.upstream_offsets[-1] + 3):
        translated = store.translate_downstream(TOPIC, 0, committed)
        if translated is None:
            continue
        read = {u for u, d in mirror.writes if d >= translated}
        assert {u for u in mirror.upstream_offsets if u >= committed} <= read, (committed, translated)


def test_progress_syncs_extend_the_newest_run_without_growing_memory():
    store = OffsetSyncStore()
    for offset in range(0, 10_000, 100):  # offset.lag.max syncs with an unchanged difference
        store.update(OffsetSync(TOPIC, 0, offset + 7, offset))
    assert store.sync_count(TOPIC, 0) == 1
    assert store.newest_sync(TOPIC, 0) == OffsetSync(TOPIC, 0, 9907, 9900)
    assert store.translate_downstream(TOPIC, 0, 9000) == 8993


def test_memory_cap_drops_the_oldest_syncs_first():
    store = OffsetSyncStore(max_syncs_per_partition=16)
    for index in range(100):  # every record skips one upstream offset: one sync each
        store.update(OffsetSync(TOPIC, 0, 2 * index, index))
    assert store.sync_count(TOPIC, 0) <= 16
    oldest = store.oldest_upstream_offset(TOPIC, 0)
    assert oldest is not None and oldest > 0
    assert store.translate_downstream(TOPIC, 0, oldest - 1) is None
    assert store.translate_downstream(TOPIC, 0, 198) == 99


def test_a_recreated_target_partition_invalidates_older_syncs():
    store = OffsetSyncStore()
    store.update(OffsetSync(TOPIC, 0, 0, 0))
    store.update(OffsetSync(TOPIC, 0, 50, 40))
    store.update(OffsetSync(TOPIC, 0, 60, 0))  # target topic recreated, mirroring restarted at 60
    store.update(OffsetSync(TOPIC, 0, 70, 10))
    assert store.translate_downstream(TOPIC, 0, 59) is None
    assert (
        store.translate_downstream(
            TOPIC,
            0,
            65,
        )
        == 5
    )


@pytest.mark.parametrize("offset", [-1, -1001])
def test_special_offsets_are_not_translated(offset: int):
    store = OffsetSyncStore()
    store.update(OffsetSync(TOPIC, 0, 0, 0))
    assert store.translate_downstream(TOPIC, 0, offset) is None
    assert store.translate_downstream("unknown", 0, 5) is None


def test_a_late_sync_the_held_syncs_already_describe_is_no_rewind():
    """A worker frozen past its lease emits the syncs of what it committed after its successor emitted
    newer ones (exactly_once in transactions: the successor's records start past the commit marker and
    the zombie's aborted records). Treated as a rewind, it dropped the successor's syncs and the verifier
    looked for source offset 2059 at target offset 2059 forever."""
    store = OffsetSyncStore()
    for upstream, downstream in [(0, 0), (2059, 2100), (2500, 2542)]:
        store.update(OffsetSync("t", 0, upstream, downstream))
    store.update(OffsetSync("t", 0, 2058, 2058))  # the zombie's progress sync, late
    assert store.translate_downstream("t", 0, 2059) == 2100
    assert store.translate_downstream("t", 0, 2600) == 2543  # past the newest sync: at most one past it
    assert store.newest_sync("t", 0) == OffsetSync("t", 0, 2500, 2542)
    # A real rewind (the target topic recreated: the same upstream offset now at downstream 0) still drops.
    store.update(OffsetSync("t", 0, 2058, 0))
    assert store.translate_downstream("t", 0, 2058) == 0
