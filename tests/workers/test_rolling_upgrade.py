"""Worker pools, a rolling upgrade and a scale-down under steady traffic, with the real runtime: workers
started as docs/operations.md tells operators (`--pool=threads -c 4`) and beat.

An exactly_once flow pinned to worker pool `payments`:
- with no live worker of its pool, it is flagged (pools API and page, flow page, overview) and the
  `pool_without_workers` rule fires; a default-pool worker beside it never runs it;
- its two `replication.payments` workers are replaced one by one (a new one started, the old one sent
  SIGTERM), then one is stopped for good: a worker stopped warm hands its chains over (positions
  persisted, lease given to a new chain on the pool's queue), so the supervisor never has to restart a
  chain after a lease expiry, and every record arrives exactly once;
- once its last worker is gone it is flagged again.

The longest arrival gap is printed, not asserted (no wall-clock assertions in tests): `python -m bench
upgrade` measures it against its 1 s target.
"""

from __future__ import annotations

import time

import pytest

from controlplane import alerts
from controlplane.alerts.models import Alert, AlertRule
from controlplane.flows import pools
from harness.runtime import (
    ArrivalRecorder,
    SteadyTraffic,
    create_topic,
    mirrored_offsets,
    replication_started,
    rolling_upgrade,
    wait_until,
)

RATE_PER_S = 1000
POOL_QUEUE = "replication.payments"
FLAG = "pinned to worker pool <strong>payments</strong>"


def _waiting_in_payments() -> list[str]:
    payments = next((pool for pool in pools.pool_list() if pool.name == "payments"), None)
    return [flow.name for flow in payments.flows_waiting] if payments else []


def _pool_alert_firing(flow) -> bool:
    alerts.alerts_evaluate()
    return Alert.objects.filter(flow=flow, rule=AlertRule.POOL_WITHOUT_WORKERS, state="firing").exists()


@pytest.mark.kafka
def test_a_pinned_flow_runs_only_on_its_pool_which_upgrades_and_scales_down_handing_chains_over(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, client_as
):
    celery_runtime.env["MIRRORPLANE_PRESENCE_INTERVAL_S"] = "1"  # a killed worker is unseen after 3 s
    # The production lease TTL: chains move by hand-over, never by expiry (the tests' 3 s could expire
    # on a loaded machine while a stopping worker settles, and the supervisor would restart the chain).
    celery_runtime.env["MIRRORPLANE_LEASE_TTL_S"] = "15"
    create_topic(cluster_a, unique_name)
    flow = make_flow(topics=[unique_name], tasks_max=2, delivery_guarantee="exactly_once", pool="payments")
    remote = f"A.{unique_name}"
    celery_runtime.start_worker("default", queues="replication,metadata")
    celery_runtime.start_beat()
    traffic = SteadyTraffic(cluster_a, unique_name, rate_per_s=RATE_PER_S).start()
    try:
        celery_runtime.wait_ready("default", timeout_s=60)
        # No worker of pool payments: flagged everywhere.
        assert _waiting_in_payments() == [flow.name]
        assert _pool_alert_firing(flow)
        viewer = client_as("viewer")
        assert FLAG in viewer.get(f"/flows/{flow.pk}/").text and FLAG in viewer.get("/").text

        celery_runtime.start_worker("w1", queues=POOL_QUEUE)
        celery_runtime.start_worker("w2", queues=POOL_QUEUE)
        wait_until(
            lambda: replication_started(cluster_b, remote), timeout_s=60, what="the first records replicated"
        )
        assert _waiting_in_payments() == [] and not _pool_alert_firing(flow)  # resolved

        def payments_workers() -> list[str]:
            listed = {pool["name"]: pool for pool in viewer.get("/api/v1/pools/").json()}
            return sorted(w["name"].split("@")[0] for w in listed["payments"]["workers"])

        wait_until(lambda: payments_workers() == ["w1", "w2"], timeout_s=120, what="both workers listed")
        assert "w1@" in viewer.get("/pools/").text

        recorder = ArrivalRecorder(cluster_b, remote).start()
        wait_until(lambda: all(recorder.arrivals.values()), timeout_s=60, what="records on every partition")
        # Chains the supervisor restarted while the pool had no worker (their leases expired) are not
        # the upgrade's: count from here.
        supervisor_starts = celery_runtime.log("beat").count("started task chain(s)")
        started = time.time()
        successors = rolling_upgrade(celery_runtime, ["w1", "w2"], queues=POOL_QUEUE, settle_s=1.0)
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

    assert f"replicating {unique_name} -> " not in celery_runtime.log(
        "default"
    )  # the default pool never ran it
    stopped = ["w1", "w2", successors[0]]
    ran_here = [name for name in stopped if f"replicating {unique_name} -> " in celery_runtime.log(name)]
    assert ran_here, "no stopped worker ever ran a slice"
    for name in ran_here:
        assert "handed over to chain" in celery_runtime.log(name), f"{name} did not hand its chains over"
    # Every owner during the upgrade got its chain by a hand-over, none after a lease expiry.
    assert celery_runtime.log("beat").count("started task chain(s)") == supervisor_starts

    celery_runtime.kill(successors[1])  # the pool's last worker
    wait_until(lambda: _waiting_in_payments() == [flow.name], timeout_s=30, what="the flow flagged again")
    assert _pool_alert_firing(flow)
