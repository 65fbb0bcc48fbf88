"""Generation fencing on the real runtime (Celery workers, Apache Kafka): a worker frozen with a
transaction open while `tasks.max` changes (3 -> 2, then 2 -> 3) is fenced by the new assignment before
its tasks write, stops with a message that says so when it wakes; a partition added fences the running
tasks before the new assignment's write; and a read_committed reader of the remote topic sees every
source offset exactly once."""

from __future__ import annotations

import os
import re
import signal

import pytest

from controlplane.flows import services
from controlplane.status.models import FlowEvent
from harness.runtime import (
    CeleryRuntime,
    SteadyTraffic,
    assert_mirrored_exactly_once,
    create_topic,
    wait_until,
)
from replication.kafka.admin import TopicAdmin
from replication.kafka.source_io import PartitionReader
from tests.replication.test_transactions import freeze_in_a_transaction

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 4
# The zombie's message: fenced, and told it was by a new assignment (not by a takeover of its own task).
FENCED_BY_NEW_ASSIGNMENT = re.compile(r"was fenced on B while .*: the flow's partitions were assigned anew")
# The flow event of a generation's fencing: its task count, and the highest task id it fenced.
FENCING = re.compile(r"\((\d) task\(s\)\): the transactional ids of tasks 0\.\.(\d) fenced")


def _written(reader: PartitionReader, topic: str, partition: int) -> int:
    """The partition's high watermark: records written, committed or not (0 while it does not exist).
    `reader`: one kept between checks (a new one connects two clients first, about a second at load)."""
    found, _ = reader.watermarks_all([(topic, partition)])
    return found.get((topic, partition), (0, 0))[1]


def _resize_under_a_zombie(
    runtime: CeleryRuntime,
    flow,
    *,
    zombie: str,
    successor: str,
    tasks_max: int,
    moving: int,
    reader: PartitionReader,
    remote: str,
) -> None:
    """Freeze `zombie` (the only worker) with a transaction open on partition `moving` (which the new
    assignment gives to another task index), start `successor`, change tasks.max, wait until the new
    tasks write `moving`, wake the zombie, wait until it was fenced, and stop it."""
    process = runtime.processes[zombie]
    freeze_in_a_transaction(process.pid, reader.cluster, remote, among=[moving])
    seen = len(runtime.log(zombie))
    try:
        runtime.start_worker(successor)
        written = _written(reader, remote, moving)
        services.flow_update(actor=None, flow=flow, tasks_max=tasks_max)
        wait_until(
            lambda: _written(reader, remote, moving) > written,
            timeout_s=60,
            what=f"the new tasks writing partition {moving}",
        )
    finally:
        os.kill(process.pid, signal.SIGCONT)  # it wakes up and goes on with the slice it was in
    wait_until(lambda: "was fenced on" in runtime.log(zombie)[seen:], timeout_s=60, what=f"{zombie} fenced")
    runtime.kill(zombie)


def test_a_worker_frozen_while_tasks_max_changes_is_fenced_and_every_offset_is_mirrored_once(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, redis_url
):
    create_topic(cluster_a, unique_name, PARTITIONS)
    flow = make_flow(
        topics=[unique_name],
        tasks_max=3,
        delivery_guarantee="exactly_once",
        refresh_topics_interval_seconds=1,
    )
    fencings = FlowEvent.objects.filter(flow=flow, message__contains="fenced before its tasks write")
    remote = f"A.{unique_name}"
    watch = PartitionReader(cluster_b)
    target = {"reader": watch, "remote": remote}
    celery_runtime.start_worker("w1")
    celery_runtime.start_beat()
    traffic = SteadyTraffic(cluster_a, unique_name, rate_per_s=1000, partitions=PARTITIONS).start()
    try:
        wait_until(lambda: _written(watch, remote, 2) > 0, timeout_s=90, what="replication")
        # 3 tasks ([p0 p3] [p1] [p2]) -> 2 ([p0 p2] [p1 p3]): p2's task index 2 is used no more.
        _resize_under_a_zombie(
            celery_runtime, flow, zombie="w1", successor="w2", tasks_max=2, moving=2, **target
        )
        # 2 -> 3: p3 moves from task 1 to task 0, p2 from task 0 to task 2.
        _resize_under_a_zombie(
            celery_runtime, flow, zombie="w2", successor="w3", tasks_max=3, moving=3, **target
        )
        # A partition added: a new generation again, whose fencing stops w3's running tasks first.
        TopicAdmin(cluster_a).create_partitions(unique_name, current=PARTITIONS, desired=PARTITIONS + 1)
        wait_until(lambda: fencings.count() == 4, timeout_s=60, what="the fencing of the grown assignment")
        written = _written(watch, remote, 0)
        wait_until(lambda: _written(watch, remote, 0) > written, timeout_s=60, what="replicating again")
    finally:
        produced = traffic.stop()
        watch.close()
    assert_mirrored_exactly_once(cluster_b, remote, produced)  # as a read_committed consumer reads it
    for zombie in ("w1", "w2"):  # told why, and its chains ended without a failure
        assert FENCED_BY_NEW_ASSIGNMENT.search(celery_runtime.log(zombie)), zombie
        assert "Traceback" not in celery_runtime.log(zombie), zombie
    # One fencing per generation, each of every id ever used (the 2-task one fences id 2 too).
    fenced = [FENCING.search(event.message).groups() for event in fencings.order_by("at", "pk")]
    assert fenced == [("3", "2"), ("2", "2"), ("3", "2"), ("3", "2")]  # (tasks, highest id fenced)
