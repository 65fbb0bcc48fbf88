"""Taking over from MM2 on the operations worker: the dry run's worker is killed -9 while it reads MM2's
state, and another worker resumes it once the lease expired, to the full plan."""

from __future__ import annotations

import re
import time

import pytest
from django.db import transaction

from controlplane import operations
from controlplane.operations import takeover
from controlplane.operations.models import Operation, OperationPhase
from harness.runtime import wait_until
from tests.replication.test_takeover import MM2_RESUMES, stopped_mm2

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_dry_run_killed_mid_read_is_resumed_by_another_worker(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, settings
):
    celery_runtime.env["MIRRORPLANE_OPERATION_LEASE_S"] = "2"
    settings.MIRRORPLANE_OPERATION_LEASE_S = 2
    celery_runtime.start_worker("ops1", queues="operations", concurrency=1)  # it starts meanwhile
    celery_runtime.start_beat()
    offsets_topic = f"mm2-offsets-{unique_name}"
    stopped_mm2(
        cluster_a, cluster_b, physical=(cluster_a, cluster_b), topic=unique_name, offsets_topic=offsets_topic
    )
    flow = make_flow(topics=[re.escape(unique_name)])
    operation = takeover.takeover_request(actor=None, flow=flow, offsets_topic=offsets_topic)
    # The test holds the operation's row, letting go between looks: ops1 records one step per look (each
    # step renews the lease on that row), so it is seen at its first step reading MM2's state, and
    # killed -9 there, however fast it reads.
    deadline = time.monotonic() + 60
    while True:
        with transaction.atomic():
            if Operation.objects.select_for_update().get(pk=operation.pk).phase == OperationPhase.PLANNING:
                celery_runtime.kill("ops1")
                break
            time.sleep(0.1)
        assert time.monotonic() < deadline, "ops1 did not start reading MM2's state"
    operation.refresh_from_db()
    assert (operation.active, operation.phase, operation.attempts) == (True, OperationPhase.PLANNING, 1)
    assert "plan" not in operation.result

    wait_until(
        lambda: operations.run_operation(operation_id=operation.pk, worker="resumer") is not None,
        timeout_s=30,
        what="the lease to expire and the dry run to resume",
    )
    operation.refresh_from_db()
    assert (operation.outcome, operation.phase, operation.attempts) == ("succeeded", "done", 2), (
        operation.error
    )
    plan = operation.result["plan"]
    rows = {row["partition"]: (row["next_offset"], row["already_on_target"]) for row in plan["partitions"]}
    assert (rows, plan["mm2_positions"]) == (MM2_RESUMES, 2)
