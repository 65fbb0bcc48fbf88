"""`TaskMetrics` without a task: what a task reports to its flow's `MirrorMetrics` per partition, never
per record. A transactional task counts what commits included (aborted records apart), a held partition
is reported as behind every slice, latency is weighted by the records acknowledged since it was last
observed, and a slice reports the partitions with news plus a rotating share of the others."""

from __future__ import annotations

from replication.memory.task_io import CREATE_TIME, MemoryCluster, MemoryRecord, MemorySource
from replication.metrics import MirrorMetrics
from replication.partition_state import PartitionState
from replication.task_io import SchemaWait
from replication.task_metrics import Rotation, TaskMetrics
from tests.replication.states import partition_state

NOW = 1_700_000_000.0


def setup(*, transactional: bool, records: int = 10) -> tuple[TaskMetrics, MirrorMetrics, PartitionState]:
    cluster = MemoryCluster()
    cluster.create("orders", 1)
    for i in range(records):
        cluster.append("orders", 0, key=None, value=b"v%d" % i)
    source = MemorySource(cluster)
    source.assign({("orders", 0): records})  # the consumer fetched everything there is
    metrics = MirrorMetrics()
    reporter = TaskMetrics(metrics=metrics, source=source, transactional=transactional)
    state = partition_state()
    return reporter, metrics, state


def acknowledge(state: PartitionState, count: int, *, timestamp_ms: float) -> None:
    state.acked_records += count
    state.acked_bytes += 10 * count
    state.next_offset += count
    state.last_acked = MemoryRecord(
        "A.orders", 0, state.next_offset - 1, None, b"x", None, (CREATE_TIME, timestamp_ms)
    )


def test_a_transactional_task_counts_what_commits_included_and_aborted_records_apart():
    reporter, metrics, state = setup(transactional=True)
    states = {state.key: state}
    acknowledge(state, 6, timestamp_ms=NOW * 1000)
    reporter.unreported[state.key] = state
    reporter.report(states, held={}, now=NOW)
    assert metrics.snapshot(now=NOW)[0].record_count == 0  # acknowledged, not committed
    state.committed_records, state.committed_bytes = 4, 40
    reporter.unreported[state.key] = state
    reporter.report(states, held={}, now=NOW)
    reporter.aborted(state, 2, NOW)
    (partition,) = metrics.snapshot(now=NOW)
    assert (partition.record_count, partition.byte_count, partition.aborted_count) == (4, 40, 2)
    reporter.report(states, held={}, now=NOW)  # no news: nothing reported again
    assert metrics.snapshot(now=NOW)[0].record_count == 4


def test_an_at_least_once_task_counts_acknowledged_records_once_each():
    reporter, metrics, state = setup(transactional=False)
    acknowledge(state, 6, timestamp_ms=NOW * 1000)
    for _ in range(2):
        reporter.unreported[state.key] = state
        reporter.report({state.key: state}, held={}, now=NOW)
    assert metrics.snapshot(now=NOW)[0].record_count == 6


def test_a_held_partition_is_reported_every_slice_as_behind_what_its_consumer_fetched_past():
    reporter, metrics, state = setup(transactional=False, records=10)
    acknowledge(state, 3, timestamp_ms=NOW * 1000)
    state.held = (3, SchemaWait(7, "missing"))
    reporter.report({state.key: state}, held={state.key: state}, now=NOW)
    # Its consumer fetched past the held record and dropped what came after: those are behind.
    assert metrics.snapshot(now=NOW)[0].records_behind == 7
    state.held = None
    reporter.report({state.key: state}, held={}, now=NOW)  # not held, no news, not swept: not reported
    assert metrics.snapshot(now=NOW)[0].records_behind == 7
    state.next_offset = 10  # fetched (and, say, skipped) to the end
    reporter.report({state.key: state}, held={}, now=NOW, swept=[state.key])
    assert metrics.snapshot(now=NOW)[0].records_behind == 0


def test_latency_is_observed_once_per_new_acknowledgement_weighted_by_the_records_since():
    reporter, metrics, state = setup(transactional=False)
    acknowledge(state, 5, timestamp_ms=NOW * 1000 - 40)
    reporter.latency(state, NOW)
    reporter.latency(state, NOW + 1)  # nothing new acknowledged: nothing observed
    acknowledge(state, 2, timestamp_ms=NOW * 1000 - 400)
    reporter.latency(state, NOW)
    (partition,) = metrics.snapshot(now=NOW)
    assert sum(partition.latency_counts) == 7
    assert partition.latency_sum_ms == 5 * 40 + 2 * 400


def test_a_rotation_visits_every_key_within_its_period_and_a_small_set_whole():
    rotation = Rotation(period_s=5.0, minimum=2)
    keys = [("orders", p) for p in range(10)]
    rotation.reset(keys)
    assert rotation.take(now=0.0) == keys  # the first take: a whole period's share
    seen = [key for step in range(1, 6) for key in rotation.take(now=float(step))]
    assert seen == keys  # one second of five: a fifth each time
    small = Rotation(period_s=5.0, minimum=16)
    small.reset(keys[:3])
    assert small.take(now=0.0) == small.take(now=0.1) == keys[:3]
