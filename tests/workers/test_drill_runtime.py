"""A drill on the operations worker, killed -9 while its shadow group exists on the target: the drill
resumes, deletes that shadow group first, passes by content, and leaves no shadow group behind."""

from __future__ import annotations

import re

import pytest

from controlplane import operations
from controlplane.operations import drills
from controlplane.operations.models import Operation, OperationPhase, ShadowGroup
from harness.runtime import create_topic, wait_until
from replication.drill import SHADOW_PREFIX
from replication.kafka.groups import GroupOffsetsAdmin
from tests.failover.conftest import Mirror, produce_plain, read_partition

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def shadow_groups_on(cluster) -> list[str]:
    return [g for g in GroupOffsetsAdmin(cluster).list_groups() if g.startswith(SHADOW_PREFIX)]


def test_no_shadow_group_is_left_behind_after_a_kill_9_mid_drill(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, settings
):
    celery_runtime.env["MIRRORPLANE_OPERATION_LEASE_S"] = "2"
    settings.MIRRORPLANE_OPERATION_LEASE_S = 2
    topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
    create_topic(cluster_a, topic, 1)
    flow = make_flow(topics=[re.escape(topic)], groups=[re.escape(group)])
    produce_plain(cluster_a, topic, partitions=1, count=5, tag="before")
    mirror = Mirror(flow.pk, topic, 1).start()
    wait_until(lambda: len(read_partition(cluster_b, f"A.{topic}", 0)) == 5, timeout_s=60, what="replication")
    mirror.stop()
    assert GroupOffsetsAdmin(cluster_a).alter_offsets(group, {(topic, 0): 5}) == {}
    # The group's next record is not on the target, and replication is stopped: the drill's shadow group
    # waits for its copy (timeout_s), which is when the worker dies.
    produce_plain(cluster_a, topic, partitions=1, count=1, tag="next")
    operation = drills.drill_request(
        actor=None, flow=flow, groups=[group], drain_timeout_s=3, record_wait_s=3
    )

    celery_runtime.start_worker("ops1", queues="operations", concurrency=1)
    celery_runtime.start_beat()
    wait_until(
        lambda: (
            ShadowGroup.objects.filter(operation=operation, deleted_at__isnull=True).exists()
            and shadow_groups_on(cluster_b)
        ),
        timeout_s=60,
        what="the shadow group on B",
    )
    celery_runtime.kill("ops1")  # kill -9 mid-drill: the shadow group stays on B, its row undeleted
    (left,) = shadow_groups_on(cluster_b)
    assert Operation.objects.get(pk=operation.pk).phase == OperationPhase.SHADOWING

    mirror = Mirror(flow.pk, topic, 1).start()  # replication back: the copy arrives
    try:
        wait_until(
            lambda: operations.run_operation(operation_id=operation.pk, worker="resumer") is not None,
            timeout_s=30,
            what="the lease to expire and the drill to resume",
        )
    finally:
        mirror.stop()
    operation.refresh_from_db()
    assert (operation.outcome, operation.attempts) == ("succeeded", 2), operation.error
    (result,) = operation.drill_results.all()
    assert (result.outcome, result.source_offset) == ("passed", 5), result.reason
    assert shadow_groups_on(cluster_b) == []  # the killed worker's shadow group too
    assert not ShadowGroup.objects.filter(deleted_at__isnull=True).exists()
    assert sorted(ShadowGroup.objects.filter(operation=operation).values_list("name", flat=True))[0] == left
