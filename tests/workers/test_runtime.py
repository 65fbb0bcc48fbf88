"""The Celery runtime end to end: real worker and beat processes, Redis, PostgreSQL, embedded Kafka."""

from __future__ import annotations

import time

import pyarrow.dataset as ds
import pytest

from controlplane.flows import services
from controlplane.status.models import FlowEvent, FlowPartitionStatus, PartitionState
from harness.runtime import (
    PARTITIONS,
    count_records,
    create_topic,
    mirrored_offsets,
    produce,
    wait_until,
)
from workers.leases import RedisLeases, task_lease_key
from workers.plans import TaskRef

pytestmark = pytest.mark.kafka


def _exactly_once(cluster, remote_topic: str, per_partition: int) -> bool:
    """Every source offset 0..per_partition-1 is in its remote partition once, in order."""
    return mirrored_offsets(cluster, remote_topic) == {
        p: list(range(per_partition)) for p in range(PARTITIONS)
    }


def _replicated(cluster, remote_topic: str, expected: int):
    def check():
        try:
            return count_records(cluster, remote_topic) >= expected
        except Exception:  # the remote topic is not created yet
            return False

    return check


def test_two_workers_share_a_flow_and_both_replicate(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name
):
    create_topic(cluster_a, unique_name)
    flow = make_flow(topics=[unique_name], tasks_max=2, delivery_guarantee="exactly_once")
    # With the threads pool one worker may take both chains' first slices; a chain is offered back to the
    # shared queue every 2 slices here (production: every 60) while that evens the pool, so the second
    # worker gets one soon.
    celery_runtime.env["MIRRORPLANE_REBALANCE_SLICES"] = "2"
    celery_runtime.start_worker("w1")
    celery_runtime.start_worker("w2")
    celery_runtime.start_beat()
    remote = f"A.{unique_name}"
    produce(cluster_a, unique_name, 1000)
    wait_until(_replicated(cluster_b, remote, 1000), timeout_s=90, what="1000 records replicated")

    def rows():
        if not celery_runtime.metrics_dir.exists():
            return []
        # The hive directory `flow=<id>` and the data column `flow` (its name) clash: read files only.
        table = ds.dataset(celery_runtime.metrics_dir, format="parquet").to_table()
        if "flow_id" not in table.column_names:  # the folder exists, no file is written yet
            return []
        return table.filter(ds.field("flow_id") == flow.pk).to_pylist()

    def workers_with_records():
        return {row["worker"] for row in rows() if row["records"] > 0}

    def last_worker_of_each_task():
        latest = {}
        for row in sorted(rows(), key=lambda row: row["ts"]):
            latest[row["task_index"]] = (row["ts"], row["worker"])
        return latest

    # Which worker takes a chain offered to the shared queue is up to them: traffic goes on (100 records
    # a second) until both have replicated some, each with a chain of its own.
    produced = 1000

    def traffic(seconds: int) -> None:
        nonlocal produced
        for _ in range(seconds):
            produce(cluster_a, unique_name, 100)
            produced += 100
            time.sleep(1)

    def balanced() -> dict:
        """Until both workers have replicated some, each with a chain of its own: the tasks' latest rows."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            latest = last_worker_of_each_task()
            if len(workers_with_records()) == 2 and len({worker for _, worker in latest.values()}) == 2:
                break
            traffic(1)
        assert len(workers_with_records()) == 2, f"records replicated by {workers_with_records()} only"
        assert len({worker for _, worker in latest.values()}) == 2, latest
        return latest

    def chains_started() -> int:
        """Chains the supervisor (in beat) started: a task whose lease lapsed is started anew."""
        return celery_runtime.log("beat").count("started task chain(s)")

    # Balanced (one chain each): they stay, though every second slice is a rebalance point here. A move
    # would restart the task on the other worker for nothing (before: half of those points moved one).
    # The watch starts a few slices later: the lake's rows of the last moves may still be arriving.
    for _watch in range(3):
        balanced()
        started = chains_started()
        assert started >= 1, "beat's log names the chains it starts (the first two, at least)"
        traffic(5)
        balanced_at = max(row["ts"] for row in rows())
        traffic(15)
        since = [row for row in rows() if row["ts"] > balanced_at]
        assert len({row["ts"] for row in since}) >= 10, "slices ran after the balance"
        moved = {
            index: sorted({row["worker"] for row in since if row["task_index"] == index}) for index in (0, 1)
        }
        if all(len(workers) == 1 for workers in moved.values()) or chains_started() == started:
            break
        # A worker stalled past the harness's 3 s lease (a loaded machine): the supervisor started that
        # task's chain anew, on either worker; not a move of a balanced chain. Balance and watch again.
    assert all(len(workers) == 1 for workers in moved.values()), moved
    assert moved[0] != moved[1], moved  # one chain each
    wait_until(_replicated(cluster_b, remote, produced), timeout_s=90, what=f"{produced} records replicated")
    per_partition = produced // PARTITIONS
    assert _exactly_once(cluster_b, remote, per_partition)
    try:
        statuses = wait_until(
            # Every partition caught up and its lag measured at 0: a report from a task that took a
            # partition over this slice says "unknown" (null) until its consumer has read the
            # partition's end, so wait for reports that know.
            lambda: (
                len(
                    s := list(
                        FlowPartitionStatus.objects.filter(
                            flow=flow, replicated_offset=per_partition, records_behind=0
                        )
                    )
                )
                == PARTITIONS
                and s
            ),
            timeout_s=30,
            what="partition statuses",
        )
    except AssertionError:
        rows = FlowPartitionStatus.objects.filter(flow=flow).values_list(
            "partition", "task_index", "replicated_offset", "records_behind", "state", "observed_at"
        )
        raise AssertionError(f"statuses: {list(rows)}") from None
    assert {(s.topic, s.partition) for s in statuses} == {(unique_name, p) for p in range(PARTITIONS)}
    assert {s.task_index for s in statuses} == {0, 1}
    assert all(s.records_behind == 0 and s.state == PartitionState.OK for s in statuses), [
        (s.partition, s.task_index, s.replicated_offset, s.records_behind, s.state, s.last_error)
        for s in statuses
    ]


def test_pause_resume_config_edit_and_delete_take_effect(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, redis_url
):
    first, second = f"{unique_name}-1", f"{unique_name}-2"
    create_topic(cluster_a, first)
    create_topic(cluster_a, second)
    flow = make_flow(topics=[first], tasks_max=1)
    celery_runtime.start_worker("w1")
    celery_runtime.start_beat()
    # The first copy's clock starts once the worker runs: a suite run beside other tests (load about 10) saw no copy
    # within 60 s of starting it, most of which a loaded machine spends starting a worker process.
    celery_runtime.wait_ready("w1")
    produce(cluster_a, first, 400)
    wait_until(_replicated(cluster_b, f"A.{first}", 400), timeout_s=60, what="first batch replicated")

    services.flow_pause(actor=None, flow=flow)
    leases = RedisLeases.from_url(redis_url)
    lease = task_lease_key(TaskRef(flow.pk, 0))
    wait_until(
        lambda: leases.holders([lease]) == [None], timeout_s=20, what="the paused flow's lease released"
    )
    produce(cluster_a, first, 400)
    assert count_records(cluster_b, f"A.{first}") == 400  # paused: nothing more is replicated

    services.flow_resume(actor=None, flow=flow)
    wait_until(_replicated(cluster_b, f"A.{first}", 800), timeout_s=60, what="replication after resume")

    # A config edit (another topic) applies without a restart.
    services.flow_update(actor=None, flow=flow, topics=[first, second])
    produce(cluster_a, second, 200)
    wait_until(_replicated(cluster_b, f"A.{second}", 200), timeout_s=60, what="the added topic replicated")
    assert count_records(cluster_b, f"A.{first}") == 800

    services.flow_delete(actor=None, flow=flow)
    wait_until(
        lambda: leases.holders([lease]) == [None], timeout_s=20, what="the deleted flow's lease released"
    )
    produce(cluster_a, second, 200)
    assert count_records(cluster_b, f"A.{second}") == 200
    assert FlowEvent.objects.count() == 0  # deleting the flow deleted its events; no stray rows
