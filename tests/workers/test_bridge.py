"""SliceBridge: a cached task keeps replicating between two slices of its chain, holding the lease, and
settles when the next slice does not come; merge_results reports it with the next slice."""

from __future__ import annotations

import contextlib
import time

import pytest

from harness.runtime import wait_until
from replication.config import DeliveryGuarantee
from replication.kafka.clients import make_admin
from replication.kafka.fencing import fence_transactional_ids
from replication.positions import InMemoryPositionStore
from replication.source import SliceError, SliceErrorKind, SliceResult
from tests.replication.test_engine_startup import delete_topics
from tests.replication.test_source_task import create_topics, make_task, produce, read_partition
from workers.bridge import SliceBridge, bridge_max_s, merge_results, slice_records_left
from workers.leases import RedisLeases, new_token, task_lease_key
from workers.plans import TaskRef


def test_merged_results_add_counts_keep_both_events_and_errors_and_the_later_state():
    e1 = SliceError(SliceErrorKind.PERSIST, "e1")
    e2 = SliceError(SliceErrorKind.DELIVERY, "e2", ("t", 0))
    earlier = SliceResult(records=3, bytes=30, positions={("t", 0): 3}, errors=(e1,), caught_up=True)
    later = SliceResult(records=2, bytes=20, positions={("t", 0): 5}, errors=(e2,), stopped_partitions=())
    assert merge_results(earlier, later) == SliceResult(
        records=5, bytes=50, positions={("t", 0): 5}, errors=(e1, e2), caught_up=False
    )
    assert merge_results(None, later) is later


def test_a_bridge_runs_at_most_one_slice_and_a_third_of_the_lease():
    assert bridge_max_s(slice_s=1.0, lease_ttl_s=15) == 1.0
    assert bridge_max_s(slice_s=1.0, lease_ttl_s=1.5) == 0.5


def test_what_the_bridge_took_counts_towards_the_next_slices_record_limit():
    carried = SliceResult(records=30, bytes=300, positions={})
    assert slice_records_left(max_records=100, carried=carried) == 70
    assert slice_records_left(max_records=20, carried=carried) == 0
    assert slice_records_left(max_records=20, carried=None) == 20


def _records(count: int) -> dict[int, list]:
    return {p: [(b"k%d" % i, b"v%d" % i, None, 1_700_000_000_000 + i) for i in range(count)] for p in (0, 1)}


@pytest.fixture
def lease(redis_url):
    leases = RedisLeases.from_url(redis_url)
    key, token = task_lease_key(TaskRef(1, 0)), new_token()
    assert leases.try_acquire(key, token, ttl_s=1.0)
    return leases, key, token


@pytest.fixture
def store_and_task(request, cluster_a, cluster_b, unique_name):
    """A task of the 2 partitions of topic `unique_name` (and A.<it> on B), with its position store; its
    flow settings are the test's indirect parameter, if any."""
    create_topics(cluster_a, [unique_name], 2)
    create_topics(cluster_b, [f"A.{unique_name}"], 2)
    store = InMemoryPositionStore()
    task = make_task(cluster_a, cluster_b, [unique_name], store=store, **getattr(request, "param", {}))
    task.assign([(unique_name, 0), (unique_name, 1)])
    yield store, task
    task.close()


@pytest.fixture
def start_bridge(lease, store_and_task):
    """`start_bridge(max_s=, max_records=)`: a SliceBridge of the task, holding the test's lease (1 s TTL);
    a bridge the test left running is stopped before the task closes."""
    leases, key, token = lease
    _, task = store_and_task
    started: list[SliceBridge] = []

    def start(*, max_s: float, max_records: int) -> SliceBridge:
        started.append(
            SliceBridge(
                task,
                max_s=max_s,
                max_records=max_records,
                name="bridge-test",
                leases=leases,
                lease_key=key,
                chain=token,
                lease_ttl_s=1.0,
            )
        )
        return started[-1]

    yield start
    for bridge in started:
        with contextlib.suppress(RuntimeError):  # its failure is the test's to report
            bridge.stop()


@pytest.mark.kafka
def test_records_arriving_after_a_slice_are_replicated_by_the_bridge_which_holds_the_lease(
    cluster_a, cluster_b, unique_name, lease, store_and_task, start_bridge
):
    leases, key, token = lease
    _, task = store_and_task
    task.run_slice(max_seconds=0.5, settle=False)
    bridge = start_bridge(max_s=30, max_records=100_000)
    produce(cluster_a, unique_name, _records(50))
    wait_until(
        lambda: all(len(read_partition(cluster_b, f"A.{unique_name}", p)) == 50 for p in (0, 1)),
        timeout_s=30,
        what="the bridge to replicate the records produced after the slice",
    )
    time.sleep(1.5)  # longer than the lease TTL: only renewals keep it
    assert leases.holders([key]) == [token]
    result = bridge.stop()
    assert result is not None and result.records == 100 and result.ok
    assert task.run_slice(max_seconds=0.3).records == 0  # the next slice goes on from there


@pytest.mark.kafka
def test_a_bridge_no_slice_stops_ends_by_itself_settled_with_its_positions_persisted(
    cluster_a, unique_name, store_and_task, start_bridge
):
    store, task = store_and_task
    task.run_slice(max_seconds=0.3, settle=False)
    produce(cluster_a, unique_name, _records(20))
    bridge = start_bridge(max_s=2.0, max_records=100_000)
    wait_until(lambda: bridge.ended, timeout_s=30, what="the bridge to end by itself after its 2 s")
    assert store.load(flow="A->B", partitions=[(unique_name, 0), (unique_name, 1)]) == {
        (unique_name, 0): 20,
        (unique_name, 1): 20,
    }
    result = bridge.stop()
    assert result is not None and result.records == 40 and result.ok


@pytest.mark.kafka
def test_a_bridge_takes_at_most_the_slice_record_limit_then_holds_the_lease_replicating_nothing(
    cluster_a, cluster_b, unique_name, store_and_task, start_bridge
):
    store, task = store_and_task
    task.run_slice(max_seconds=0.3, settle=False)
    produce(cluster_a, unique_name, _records(50))
    bridge = start_bridge(max_s=2.0, max_records=30)
    wait_until(lambda: bridge.ended, timeout_s=30, what="the bridge to end by itself after its 2 s")
    result = bridge.stop()
    assert result is not None and result.records == 30 and result.ok
    replicated = sum(len(read_partition(cluster_b, f"A.{unique_name}", p)) for p in (0, 1))
    assert replicated == 30
    assert sum(store.load(flow="A->B", partitions=[(unique_name, 0), (unique_name, 1)]).values()) == 30


@pytest.mark.kafka
@pytest.mark.parametrize(
    "store_and_task", [{"delivery_guarantee": DeliveryGuarantee.EXACTLY_ONCE}], indirect=True
)
def test_a_task_fenced_while_bridging_ends_the_bridge_which_reports_the_fence(
    cluster_a, cluster_b, unique_name, store_and_task, start_bridge
):
    _, task = store_and_task
    produce(cluster_a, unique_name, _records(20))
    task.run_slice(max_seconds=0.5, settle=False)  # its transactions initialised, records written
    bridge = start_bridge(max_s=2.0, max_records=100_000)
    fence_transactional_ids(task.flow, cluster_b, task_ids=1)  # e.g. a new assignment's fencing
    produce(cluster_a, unique_name, _records(20))  # what it writes next is refused
    wait_until(lambda: bridge.ended, timeout_s=30, what="the bridge to end")
    result = bridge.stop()  # no failure: the fence is in its result, and nothing is settled after it
    assert task.fenced and [e.kind for e in result.errors if e.kind is SliceErrorKind.FENCED]


@pytest.mark.kafka
def test_the_next_slice_gives_up_a_bridges_settle_instead_of_waiting_for_records_stuck_in_flight(
    cluster_a, cluster_b, unique_name, lease
):
    """Records to a remote partition the target does not serve yet wait in the producer (at 5,000
    partitions: a broker still creating them; here a remote topic not created, which the producer does
    not create, for `topic.metadata.propagation.max.ms`). A bridge settling when the next slice comes
    gives the settle up: the slice takes the task with those records still in flight, and they are
    delivered once the partition is there (nothing failed, nothing lost)."""
    topic, remote = unique_name, f"A.{unique_name}"
    leases, key, token = lease
    create_topics(cluster_a, [topic], 2)
    produce(cluster_a, topic, _records(5))
    task = make_task(
        cluster_a,
        cluster_b,
        [topic],
        remote_partition_wait_s=0,  # start without waiting for the remote topic: records go in flight
        extra={
            "producer.allow.auto.create.topics": False,
            "producer.topic.metadata.propagation.max.ms": 25_000,  # then they would fail: the old wait
        },
    )
    task.assign([(topic, 0), (topic, 1)])
    try:
        first = task.run_slice(max_seconds=1.0, settle=False)
        assert first.ok and first.records == 0, first.errors
        # Every record fetched and in flight before the bridge starts: a consumer slow to start on a loaded
        # machine had fetched nothing yet once in CI, and the bridge then had nothing to settle.
        for _ in range(20):
            if len(task._delivery.sink) == 10:
                break
            more = task.run_slice(max_seconds=0.5, settle=False)
            assert more.ok and more.records == 0, more.errors
        assert len(task._delivery.sink) == 10
        bridge = SliceBridge(
            task,
            max_s=0.1,  # its time runs out at once: it settles, and its settle waits for them
            max_records=100_000,
            name="bridge-test",
            leases=leases,
            lease_key=key,
            chain=token,
            lease_ttl_s=1.0,
        )
        time.sleep(2.0)  # the settle is under way
        assert not bridge.ended
        carried = bridge.stop()  # the next slice comes
        # Given up: no delivery failed (it did not wait the 25 s until they fail), nothing acknowledged.
        assert carried is not None and carried.ok and carried.records == 0, carried.errors
        create_topics(cluster_b, [remote], 2)
        copied = carried.records
        for _ in range(60):
            result = task.run_slice(max_seconds=0.5, settle=False)
            assert result.ok, result.errors
            copied += result.records
            if copied == 10:
                break
        assert copied == 10
        assert [len(read_partition(cluster_b, remote, p)) for p in (0, 1)] == [5, 5]
    finally:
        task.close()
        delete_topics((cluster_a, topic))
        if remote in make_admin(cluster_b).list_topics(timeout=30).topics:
            delete_topics((cluster_b, remote))
