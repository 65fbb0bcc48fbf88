"""The lag a MirrorSourceTask reports, against the embedded clusters: a transaction marker is no record
behind (the definitions' unit tests are in test_metrics.py)."""

from __future__ import annotations

import time

import pytest

from replication.kafka.clients import make_producer
from replication.metrics import MirrorMetrics
from tests.replication.test_source_task import create_topics, make_task

pytestmark = pytest.mark.kafka


def _slices_until(task, done, *, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while True:
        task.run_slice(max_seconds=0.3)
        snapshot = task.metrics.snapshot()
        if done(snapshot):
            return snapshot
        assert time.monotonic() < deadline, f"not done after {timeout_s}s: {list(snapshot)}"


def test_a_caught_up_transactional_partition_is_nothing_behind(cluster_a, cluster_b, unique_name):
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)
    transactional = make_producer(cluster_a, overrides={"transactional.id": f"tx-{unique_name}"})
    transactional.init_transactions()
    transactional.begin_transaction()
    for i in range(3):
        transactional.produce(topic, value=b"tx-%d" % i, partition=0)
    transactional.commit_transaction()  # offsets 0..2 and a commit marker at 3: the end offset is 4
    task = make_task(cluster_a, cluster_b, [topic], metrics=MirrorMetrics())
    task.assign([(topic, 0)])
    try:
        snapshot = _slices_until(
            task, lambda s: len(s) and s[0].next_offset == 3 and s[0].source_end_offset == 4
        )
        snapshot = _slices_until(task, lambda s: s[0].records_behind == 0)  # the marker is no record
        assert snapshot[0].seconds_behind == 0.0
    finally:
        task.close()
