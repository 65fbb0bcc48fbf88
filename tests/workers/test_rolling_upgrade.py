"""A rolling upgrade and a scale-down under steady traffic, on workers started as docs/operations.md
tells operators (`--pool=threads -c 4`, replication and metadata on separate workers) and beat.

A worker stopped warm (SIGTERM) hands its chains over (positions persisted, lease given to a new chain
on the shared queue): the supervisor never has to restart a chain after a lease expiry, and the
exactly_once flow delivers every record once. The longest arrival gap is printed, not asserted (no
wall-clock assertions in tests): `python -m bench upgrade` measures it against its 1 s target.
"""

from __future__ import annotations

import time

import pytest

from tests.workers.harness import (
    ArrivalRecorder,
    SteadyTraffic,
    count_records,
    create_topic,
    mirrored_offsets,
    rolling_upgrade,
    wait_until,
)

RATE_PER_S = 1000


@pytest.mark.kafka
def test_a_rolling_upgrade_and_a_scale_down_hand_chains_over_and_deliver_every_record_once(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name
):
    create_topic(cluster_a, unique_name)
    make_flow(topics=[unique_name], tasks_max=2, delivery_guarantee="exactly_once")
    remote = f"A.{unique_name}"
    celery_runtime.start_worker("metadata", queues="metadata")
    celery_runtime.start_worker("w1", queues="replication")
    celery_runtime.start_worker("w2", queues="replication")
    celery_runtime.start_beat()
    traffic = SteadyTraffic(cluster_a, unique_name, rate_per_s=RATE_PER_S).start()
    try:
        wait_until(lambda: _replicated(cluster_b, remote), timeout_s=60, what="the first records replicated")
        recorder = ArrivalRecorder(cluster_b, remote).start()
        started = time.time()
        successors = rolling_upgrade(celery_runtime, ["w1", "w2"], settle_s=1.0)
        celery_runtime.stop(successors[0])  # scaling down to one worker
        time.sleep(1.0)
    finally:
        produced = traffic.stop()
    expected = {p: list(range(count)) for p, count in produced.items()}
    try:
        wait_until(lambda: mirrored_offsets(cluster_b, remote) == expected, timeout_s=30, what="every record")
    finally:
        recorder.stop()
    gap_s, partition, _ = recorder.longest_gap(start=started, end=time.time())
    print(
        f"rolling upgrade + scale-down at {RATE_PER_S} rec/s: longest arrival gap {gap_s:.2f} s (p{partition})"
    )

    stopped = ["w1", "w2", successors[0]]
    ran_here = [name for name in stopped if "replicating" in celery_runtime.log(name)]
    assert ran_here, "no stopped worker ever ran a slice"
    for name in ran_here:
        assert "handed over to chain" in celery_runtime.log(name), f"{name} did not hand its chains over"
    # Two chains started once by the supervisor; every later owner got its chain by a hand-over, none
    # after a lease expiry.
    assert celery_runtime.log("beat").count("started task chain(s)") == 1, celery_runtime.log("beat")


def _replicated(cluster, topic: str) -> bool:
    try:
        return count_records(cluster, topic) > 0
    except Exception:  # the remote topic is not created yet
        return False
