"""Isolation: a flow from a cluster nothing listens on, beside a healthy flow, on the workers exactly as
`make demo` runs them (Procfile.demo: a replication worker and a metadata/reports worker, threads pool,
under workers.respawn). The healthy flow keeps replicating; the broken one is FAULTED with its reason,
and ACTIVE again once the cluster answers."""

from __future__ import annotations

import threading
import time

import pytest
from django.urls import reverse

from controlplane.flows import services
from controlplane.flows.models import Flow, FlowState
from controlplane.status.models import FlowEvent, FlowEventKind
from harness.runtime import PARTITIONS, count_records, create_topic, produce, wait_until
from replication.kafka.processes import free_port
from replication.kafka.source_io import PartitionReader, PartitionReadError

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

BATCH = 100
LAG_BOUND = 20 * BATCH  # records: a few slices of this traffic, far below a stalled flow's backlog
# The healthy flow is watched this long after the broken one is faulted: two trial probes of the dead
# cluster at least (their backoff is at most 10 s here).
WATCH_AFTER_FAULT_S = 25


def _end_offsets(cluster, topic: str) -> int:
    """Sum of the topic's listed high watermarks (0 while it does not exist)."""
    reader = PartitionReader(cluster, timeout_s=5)
    try:
        return sum(reader.watermarks(topic, partition)[1] for partition in range(PARTITIONS))
    except PartitionReadError:  # the remote topic does not exist yet
        return 0
    finally:
        reader.close()


class SteadyTraffic(threading.Thread):
    def __init__(self, cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic = cluster, topic
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            produce(self.cluster, self.topic, BATCH)
            time.sleep(0.3)


def test_an_unreachable_cluster_faults_its_flow_and_costs_the_healthy_flow_nothing(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, users, client_as, start_broker
):
    create_topic(cluster_a, unique_name)
    healthy = make_flow(topics=[unique_name])
    target = healthy.target
    dead_port = free_port()  # nothing listens there
    dead = services.cluster_create(actor=None, alias="C", bootstrap_servers=f"127.0.0.1:{dead_port}")
    broken = services.flow_create(actor=None, source=dead, target=target, enabled=True, topics=[".*"])
    # Trial probes of the dead cluster at most every 10 s (60 s by default), so its recovery below is quick.
    celery_runtime.env["MIRRORPLANE_CLUSTER_BACKOFF_MAX_S"] = "10"
    celery_runtime.start_demo_workers()
    celery_runtime.start_beat()
    remote = f"A.{unique_name}"
    traffic = SteadyTraffic(cluster_a, unique_name)
    traffic.start()
    started = time.monotonic()
    samples = []
    faulted_after = None  # seconds from the start
    try:
        # Until the broken flow is faulted (within 60 s of the start), then WATCH_AFTER_FAULT_S more, while
        # its trial probes go on: the healthy flow must never stall.
        while True:
            time.sleep(3)
            replicated = _end_offsets(cluster_b, remote)
            produced = _end_offsets(cluster_a, unique_name)
            elapsed = time.monotonic() - started
            samples.append((round(elapsed), produced, replicated))
            if faulted_after is None and Flow.objects.get(pk=broken.pk).state == FlowState.FAULTED:
                faulted_after = elapsed
            if elapsed > (60 if faulted_after is None else faulted_after + WATCH_AFTER_FAULT_S):
                break
    finally:
        traffic.done.set()
        traffic.join()

    lags = [produced - replicated for _, produced, replicated in samples if replicated]
    print(
        f"healthy flow: {len(lags)} samples, records behind max {max(lags, default=None)}; "
        f"broken flow faulted after {faulted_after} s"
    )
    broken.refresh_from_db()
    assert broken.state == FlowState.FAULTED, samples
    assert broken.state_reason.startswith(
        f"source cluster C unreachable: 127.0.0.1:{dead_port}: connection refused"
    )
    event = FlowEvent.objects.filter(flow=broken, kind=FlowEventKind.ERROR).order_by("at").first()
    assert event is not None and event.message == broken.state_reason
    assert (event.at - broken.created_at).total_seconds() < 60, "the fault is reported within a minute"

    # The healthy flow: replicated continuously, its lag in records bounded, once its topic existed.
    running = [s for s in samples if s[2] > 0]
    assert len(running) >= len(samples) - 5, samples
    for (_, _, before), (_, _, after) in zip(running, running[1:], strict=False):
        assert after > before, f"replication stalled: {samples}"
    for _, produced, replicated in running:
        assert produced - replicated <= LAG_BOUND, samples
    assert Flow.objects.get(pk=healthy.pk).state == FlowState.ACTIVE
    total = _end_offsets(cluster_a, unique_name)
    wait_until(
        lambda: count_records(cluster_b, remote) >= total, timeout_s=60, what="the healthy flow caught up"
    )

    # Shown on the flow page and in the API.
    page = client_as("viewer").get(reverse("web:flow", args=[broken.pk]))
    assert broken.state_reason in page.content.decode()
    status = client_as("viewer").get(f"/api/v1/flows/{broken.pk}/status/").json()
    assert status["state_reason"] == broken.state_reason
    assert any(e["message"] == broken.state_reason for e in status["events"])

    # The cluster comes back (a broker starts on that port): the flow recovers by itself.
    revived = start_broker("C", port=dead_port)
    try:
        wait_until(
            lambda: Flow.objects.get(pk=broken.pk).state == FlowState.ACTIVE,
            timeout_s=60,
            what="the flow recovered",
        )
        assert FlowEvent.objects.filter(
            flow=broken, kind=FlowEventKind.INFO, message__startswith="recovered: its clusters answer again"
        ).exists()
    finally:
        revived.stop(kill=True)
