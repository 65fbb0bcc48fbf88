"""Worker pools with the real runtime: a flow pinned to pool `payments` runs only on that pool's workers
(`-Q replication.payments`), never on a default-pool worker beside it; with no live worker of its pool
it is flagged on the pools API, the flow page and the overview, and the pool_without_workers rule fires.
"""

from __future__ import annotations

import pytest

from controlplane import alerts, pools
from controlplane.models import Alert, AlertRule
from tests.workers.harness import count_records, create_topic, produce, wait_until

RECORDS = 400


def _waiting_in_payments() -> list[str]:
    payments = next((pool for pool in pools.pool_list() if pool.name == "payments"), None)
    return [flow.name for flow in payments.flows_waiting] if payments else []


def _pool_alert_firing(flow) -> bool:
    alerts.alerts_evaluate()
    return Alert.objects.filter(flow=flow, rule=AlertRule.POOL_WITHOUT_WORKERS, state="firing").exists()


def _replicated(cluster, topic: str, expected: int) -> bool:
    try:
        return count_records(cluster, topic) >= expected
    except Exception:  # the remote topic is not created yet
        return False


@pytest.mark.kafka
def test_a_flow_pinned_to_a_pool_runs_only_on_its_workers_and_is_flagged_without_one(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, client_as
):
    celery_runtime.env["MIRRORPLANE_PRESENCE_INTERVAL_S"] = "1"  # a killed worker is unseen after 3 s
    create_topic(cluster_a, unique_name)
    flow = make_flow(topics=[unique_name], tasks_max=2, pool="payments")
    produce(cluster_a, unique_name, RECORDS)
    celery_runtime.start_worker("default", queues="replication,metadata")
    celery_runtime.start_beat()
    wait_until(lambda: " ready." in celery_runtime.log("default"), timeout_s=60, what="the default worker")

    # No worker of pool payments: the flow is flagged everywhere, and nothing replicates it.
    assert _waiting_in_payments() == [flow.name]
    assert _pool_alert_firing(flow)
    viewer = client_as("viewer")
    assert "pinned to worker pool <strong>payments</strong>" in viewer.get(f"/flows/{flow.pk}/").text
    assert "pinned to worker pool <strong>payments</strong>" in viewer.get("/").text

    celery_runtime.start_worker("payments", queues="replication.payments")
    wait_until(
        lambda: _replicated(cluster_b, f"A.{unique_name}", RECORDS),
        timeout_s=90,
        what="the pool's replication",
    )
    assert "replicating" in celery_runtime.log("payments")
    assert "replicating" not in celery_runtime.log("default")  # the default pool never ran it
    assert _waiting_in_payments() == []
    assert not _pool_alert_firing(flow)  # resolved
    listed = {pool["name"]: pool for pool in viewer.get("/api/v1/pools/").json()}
    assert [w["name"].split("@")[0] for w in listed["payments"]["workers"]] == ["payments"]
    assert [w["name"].split("@")[0] for w in listed[""]["workers"]] == ["default"]
    assert "payments@" in viewer.get("/pools/").text

    celery_runtime.kill("payments")
    wait_until(lambda: _waiting_in_payments() == [flow.name], timeout_s=30, what="the flow flagged again")
    assert _pool_alert_firing(flow)
