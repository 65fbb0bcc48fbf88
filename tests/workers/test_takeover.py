"""Takeover after kill -9 of the worker running a task, with the documented pool (`--pool=threads`):
exactly_once resumes a task of 64 partitions with nothing lost or duplicated; a worker frozen past its
lease (a zombie) is fenced when it wakes up; at_least_once duplicates at most what was acknowledged since
each partition's last position record."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from harness.runtime import (
    CeleryRuntime,
    SteadyTraffic,
    assert_mirrored_exactly_once,
    create_topic,
    mirrored_offsets,
    produce,
    wait_until,
)
from replication.kafka.source_io import PartitionReader
from replication.positions import POSITION_RECORD_OFFSETS
from replication.source import MAX_IN_FLIGHT
from tests.replication.test_kill9 import lost_or_out_of_order, read_values
from tests.replication.test_transactions import freeze_in_a_transaction
from workers.leases import RedisLeases, task_lease_key
from workers.plans import TaskRef

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def watch(cluster_b):
    """One reader of the target kept between checks (a new one connects two clients first, about a second
    at load)."""
    reader = PartitionReader(cluster_b)
    yield reader
    reader.close()


def _remote_records(reader: PartitionReader, topic: str, partitions: int) -> int:
    """Records in the remote topic as its listed end offsets say (0 while it does not exist)."""
    found, _ = reader.watermarks_all([(topic, partition) for partition in range(partitions)])
    return sum(high for _, high in found.values())


def test_exactly_once_takeover_of_a_task_of_64_partitions_resumes_without_loss_or_duplicates(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, redis_url, watch
):
    partitions, per_round, rounds_after_kill = 64, 64 * 20, 6
    create_topic(cluster_a, unique_name, partitions)
    make_flow(topics=[unique_name], tasks_max=1, delivery_guarantee="exactly_once")
    remote = f"A.{unique_name}"
    celery_runtime.start_worker("w1")
    celery_runtime.start_beat()
    killed, produced = threading.Event(), []

    def traffic() -> None:
        """Rounds until w1 is killed, then `rounds_after_kill` more: w2 has records to copy whenever the
        kill comes (CI at c01250d killed w1 after a fixed 12 rounds were all copied: nothing was taken over)."""
        after = 0
        while after < rounds_after_kill and len(produced) < 400:
            after += killed.is_set()
            produce(cluster_a, unique_name, per_round, partitions=partitions)
            produced.append(per_round)
            time.sleep(0.5)

    producer = threading.Thread(target=traffic, daemon=True)
    producer.start()
    wait_until(lambda: _remote_records(watch, remote, partitions) > 0, timeout_s=90, what="replication")
    celery_runtime.kill("w1")  # mid-flow: the target holds records the stored positions do not cover
    killed.set()
    celery_runtime.start_worker("w2")
    producer.join()
    total = sum(produced)

    def all_replicated() -> bool:
        return (
            sum(len(offsets) for offsets in mirrored_offsets(cluster_b, remote, partitions).values()) >= total
        )

    wait_until(all_replicated, timeout_s=120, what=f"{total} records replicated after the takeover")
    # w2 ran the task (records were written after w1 died): a chain of its own once w1's lease expired, or
    # w1's chain if its next slice was already queued when w1 died
    assert f"replicating {unique_name} -> {remote}, " in celery_runtime.log("w2")
    per_partition = total // partitions
    offsets = mirrored_offsets(cluster_b, remote, partitions)
    for partition in range(partitions):
        assert offsets[partition] == list(range(per_partition)), (
            f"partition {partition}: {len(offsets[partition])} records, "
            f"{len(set(offsets[partition]))} distinct, expected {per_partition}"
        )


def test_a_worker_frozen_past_its_lease_is_fenced_when_it_wakes_and_nothing_is_duplicated(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, redis_url, watch
):
    partitions = 4
    create_topic(cluster_a, unique_name, partitions)
    flow = make_flow(topics=[unique_name], tasks_max=1, delivery_guarantee="exactly_once")
    remote = f"A.{unique_name}"
    zombie = celery_runtime.start_worker("w1")
    celery_runtime.start_beat()
    leases = RedisLeases.from_url(redis_url)
    key = task_lease_key(TaskRef(flow.pk, 0))
    traffic = SteadyTraffic(cluster_a, unique_name, rate_per_s=1000, partitions=partitions).start()
    try:
        wait_until(lambda: _remote_records(watch, remote, partitions) > 0, timeout_s=90, what="replication")
        holder = leases.holders([key])
        # The worker freezes mid-stream (a GC pause, a stalled VM) with a transaction open; its lease expires.
        freeze_in_a_transaction(zombie.pid, cluster_b, remote, partitions)
        celery_runtime.start_worker("w2")
        wait_until(
            lambda: leases.holders([key]) not in ([None], holder),
            timeout_s=60,
            what="w2 taking the task over",
        )
        resumed_at = sum(map(len, mirrored_offsets(cluster_b, remote, partitions).values()))
        wait_until(
            lambda: sum(map(len, mirrored_offsets(cluster_b, remote, partitions).values())) > resumed_at,
            timeout_s=60,
            what="w2 replicating",
        )
        os.kill(zombie.pid, signal.SIGCONT)  # it wakes up and goes on with the slice it was in
        wait_until(lambda: "was fenced" in celery_runtime.log("w1"), timeout_s=60, what="the zombie fenced")
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
        produced = traffic.stop()
    assert_mirrored_exactly_once(cluster_b, remote, produced)
    # The zombie's late offset syncs did not unsettle the verifier's translation (OffsetSyncStore).
    for name in ("w1", "w2"):
        assert "verification mismatch" not in celery_runtime.log(name)


def test_at_least_once_kill9_mid_catch_up_duplicates_at_most_the_persist_cadence(
    transactional_db, make_flow, cluster_a, cluster_b, unique_name, redis_url, tmp_path, watch
):
    # One slice could copy the whole backlog, so without the periodic persist a kill would make the
    # next worker write everything before it again.
    runtime = CeleryRuntime(
        workdir=tmp_path,
        redis_url=redis_url,
        env={"MIRRORPLANE_SLICE_SECONDS": "60", "MIRRORPLANE_SLICE_MAX_RECORDS": "10000000"},
    )
    records = 200_000
    create_topic(cluster_a, unique_name)
    produce(cluster_a, unique_name, records)
    make_flow(topics=[unique_name], tasks_max=1, delivery_guarantee="at_least_once")
    remote = f"A.{unique_name}"
    try:
        runtime.start_worker("w1")
        runtime.start_beat()
        wait_until(
            # One reader kept between checks: a new one per check took about a second to connect, and a
            # faster engine copied the rest of the backlog meanwhile (CI at 2bd59af: "the backlog was
            # copied before the kill").
            lambda: _remote_records(watch, remote, 4) > records // 3,
            timeout_s=120,
            what="a third of the backlog replicated",
            poll_s=0.05,
        )
        runtime.kill("w1")  # mid catch-up, mid-slice
        at_kill = _remote_records(watch, remote, 4)
        assert at_kill < records, "the backlog was copied before the kill: nothing was tested"
        runtime.start_worker("w2")
        got = read_values(cluster_b, remote, until_unique=records, timeout_s=180)
    finally:
        runtime.close()
    for partition in range(4):
        expected = [b"v%d" % index for index in range(partition, records, 4)]
        assert lost_or_out_of_order(expected, got[partition]) is None
    duplicates = sum(len(values) for values in got.values()) - records
    # What a kill leaves to write again: per partition the records acknowledged since its last position
    # record (written at the latest once it moved POSITION_RECORD_OFFSETS past the last one) and the
    # records in flight (MAX_IN_FLIGHT at most); one task of 4 partitions.
    bound = 4 * POSITION_RECORD_OFFSETS + MAX_IN_FLIGHT
    print(f"at_least_once kill -9 at {at_kill} of {records} records: {duplicates} duplicates (bound {bound})")
    assert duplicates <= bound
