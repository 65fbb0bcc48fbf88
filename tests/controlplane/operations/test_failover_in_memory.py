"""A failover's rules, run as a worker runs it (`operations.run_operation`) on the in-memory clusters
(`memory_clusters`): with the source gone, the plan comes from the newest checkpoints on the target, warns
that the source does not answer, fails `lag_zero` on the workers' last measurement (its records at risk,
with its age), and the failover is refused unless forced; forced, each group resumes on the target at its
checkpoint's downstream offset. tests/failover/test_failover_e2e.py runs the same on Apache Kafka brokers
with a mirror emitting the checkpoints (marked slow)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from replication.formats import Checkpoint
from tests.failover.conftest import fail_over_with_the_source_gone, stored_flow
from tests.status_reports import stored_report
from tests.web.mirroring import MEMORY_A, MEMORY_B, stored_cluster

pytestmark = pytest.mark.django_db

PARTITIONS = 3
CONSUMED = {0: 1, 1: 2, 2: 5}  # the group's committed offsets on the source, as its checkpoints carry them


def test_failover_with_the_source_gone_uses_the_checkpoints_and_needs_force(
    memory_clusters, admin_user, client_as, unique_name
):
    topic, group, remote = f"orders-{unique_name}", f"billing-{unique_name}", f"A.orders-{unique_name}"
    a, b = (memory_clusters.cluster(config.bootstrap_servers) for config in (MEMORY_A, MEMORY_B))
    source, target = (stored_cluster(actor=admin_user, config=config) for config in (MEMORY_A, MEMORY_B))
    flow = stored_flow(actor=admin_user, source=source, target=target, topic=topic, group=group)
    a.create(topic, PARTITIONS)
    b.create(remote, PARTITIONS)
    for partition in range(PARTITIONS):
        for index in range(6):
            value = f"p{partition}-{index}".encode()
            a.append(topic, partition, key=None, value=value)
            b.append(remote, partition, key=None, value=value)  # copied at the same offsets
    b.create("A.checkpoints.internal", 1)
    for partition, offset in CONSUMED.items():
        checkpoint = Checkpoint(group, remote, partition, offset, offset)
        b.append("A.checkpoints.internal", 0, key=checkpoint.key(), value=checkpoint.value())
    # The workers' last stored status: 4 records of partition 0 were not replicated yet; then A is gone.
    stored_report(
        flow=flow, topic=topic, partition=0, remote_topic=remote, records_behind=4, observed_at=timezone.now()
    )
    a.unreachable = "connection refused"

    fail_over_with_the_source_gone(client_as, flow=flow, group=group)
    committed = {p: c.offset for (t, p), c in b.groups[group].committed.items() if t == remote}
    assert committed == CONSUMED  # each partition resumes at its checkpoint's downstream offset
