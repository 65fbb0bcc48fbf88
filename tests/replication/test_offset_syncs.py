"""OffsetSyncWriter decisions, without a broker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.formats import OffsetSync
from replication.offset_syncs import PROGRESS_SYNC_INTERVAL_S, OffsetSyncWriter


def writer(offset_lag_max: int = 100) -> OffsetSyncWriter:
    return OffsetSyncWriter(topic="orders", partition=3, offset_lag_max=offset_lag_max)


def pairs(syncs: list[OffsetSync]) -> list[tuple[int, int]]:
    return [(s.upstream_offset, s.downstream_offset) for s in syncs]


def test_first_record_of_the_life_is_synced_then_a_steady_run_is_not():
    w = writer()
    for offset in range(50):
        w.on_ack(1000 + offset, offset)
    (sync,) = w.drain(now=0.0)
    assert sync == OffsetSync("orders", 3, 1000, 0)
    assert w.drain(now=1.0) == []


def test_every_change_of_the_offset_difference_is_synced():
    w = writer()
    acked = [(0, 0), (1, 1), (2, 2), (5, 3), (6, 4), (9, 5), (10, 6)]  # upstream skips: markers, compaction
    acked += [(3, 7), (4, 8)]  # a rewind: duplicates after a restart
    acked += [(5, 2)]  # the target went backwards (recreated)
    for upstream, downstream in acked:
        w.on_ack(upstream, downstream)
    assert pairs(w.drain(now=0.0)) == [(0, 0), (5, 3), (9, 5), (3, 7), (5, 2)]


def test_offset_lag_max_keeps_mm2_readers_translating():
    w = writer(offset_lag_max=10)
    for offset in range(25):
        w.on_ack(offset, offset)
    # MM2 translates one past a sync, so it syncs once downstream is offset.lag.max past that.
    assert pairs(w.drain(now=0.0)) == [(0, 0), (11, 11), (22, 22)]


def test_progress_sync_of_the_newest_pair_at_most_every_interval():
    w = writer()
    w.on_ack(0, 0)
    assert pairs(w.drain(now=100.0)) == [(0, 0)]
    w.on_ack(1, 1)
    w.on_ack(2, 2)
    assert w.drain(now=100.0 + PROGRESS_SYNC_INTERVAL_S / 2) == []
    assert pairs(w.drain(now=100.0 + PROGRESS_SYNC_INTERVAL_S)) == [(2, 2)]
    assert w.drain(now=100.0 + 3 * PROGRESS_SYNC_INTERVAL_S) == []  # nothing new acknowledged


def test_final_drain_syncs_the_newest_pair_at_once_so_a_stopped_flow_translates_exactly():
    w = writer()
    w.on_ack(0, 0)
    assert pairs(w.drain(now=100.0)) == [(0, 0)]
    w.on_ack(1, 1)
    w.on_ack(2, 2)
    assert pairs(w.drain(now=100.1, final=True)) == [(2, 2)]
    assert w.drain(now=100.2, final=True) == []  # nothing new: no redundant sync


def test_requeued_syncs_go_out_first_and_in_order():
    w = writer()
    w.on_ack(0, 0)
    w.on_ack(5, 1)
    failed = w.drain(now=0.0)
    w.on_ack(9, 2)
    w.requeue(failed)
    assert pairs(w.drain(now=0.0)) == [(0, 0), (5, 1), (9, 2)]


@settings(max_examples=300, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(1, 40)), min_size=1, max_size=8
    ),
    offset_lag_max=st.integers(-1, 12),
)
def test_a_run_decides_the_syncs_its_records_would_one_by_one(runs, offset_lag_max):
    """`on_run` is `on_ack` for each pair of a run, whatever came before (a new difference, a rewind, the
    lag rule mid-run), checked against it over runs that jump upstream and downstream between them."""
    by_run, by_record = writer(offset_lag_max), writer(offset_lag_max)
    upstream = downstream = 100
    for upstream_jump, downstream_jump, count in runs:
        upstream, downstream = upstream + upstream_jump, downstream + downstream_jump
        by_run.on_run(upstream, downstream, count)
        for k in range(count):
            by_record.on_ack(upstream + k, downstream + k)
        upstream, downstream = upstream + count, downstream + count
        assert pairs(by_run.drain(now=0.0)) == pairs(by_record.drain(now=0.0))
        assert by_run.idle == by_record.idle
    final = (by_run.drain(now=0.0, final=True), by_record.drain(now=0.0, final=True))
    assert pairs(final[0]) == pairs(final[1])
