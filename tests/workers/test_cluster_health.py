"""A cluster's reachability as a metadata worker sees it (probe + breaker against real brokers and a dead
port), and the fault/recover writes it drives."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError

from controlplane.flows import lifecycle
from controlplane.flows.models import Flow, FlowState
from controlplane.status import runtime
from controlplane.status.models import FlowEvent, FlowEventKind
from replication.circuit_breaker import BreakerPhase, BreakerPolicy
from replication.config import ClusterConfig
from replication.kafka.clusters import KafkaClusters
from replication.kafka.processes import free_port
from workers.clusters import ClusterHealth

pytestmark = [pytest.mark.kafka]

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _health() -> ClusterHealth:
    return ClusterHealth(
        timeout_s=1.0, probe_interval_s=60.0, policy=BreakerPolicy(failure_threshold=2, base_backoff_s=30.0)
    )


def test_a_cluster_that_answers_is_reachable(cluster_a):
    assert _health().check(cluster_a, now=0).reachable


def test_a_probe_describes_the_cluster_without_asking_for_every_topic(cluster_a):
    """The probe that runs every few seconds per cluster asks for the brokers only (DescribeCluster), not the
    metadata of every partition of the cluster: its answer names no topic."""
    probe = KafkaClusters().probe(cluster_a, timeout_s=5.0)
    first, second = probe.check(), probe.check()  # its client is kept between calls
    assert first.ok and second.ok and first.brokers == second.brokers >= 1
    assert first.topic_count is None and first.latency_ms is not None


def test_a_dead_cluster_opens_its_breaker_after_two_probes_and_is_refused_while_open(cluster_a):
    port = free_port()
    dead = ClusterConfig(alias="C", bootstrap_servers=f"127.0.0.1:{port}")
    health = _health()
    first = health.check(dead, now=0)
    assert not first.reachable and not first.confirmed  # one failed probe is not an outage yet
    assert f"127.0.0.1:{port}: connection refused" in first.error
    second = health.check(dead, now=1)
    assert not second.reachable and second.confirmed
    refused = health.check(dead, now=2)  # open: refused without a probe until the backoff ends
    assert refused.confirmed and refused.error == second.error
    assert health.check(cluster_a, now=2).reachable  # another cluster is not affected


def test_a_probe_that_raises_counts_as_a_failure_and_the_next_trial_still_runs(cluster_a):
    """A trial probe that raises (not a failed check: an exception out of the client) is a failure like
    any other: the breaker opens again and lets the next trial through, instead of staying HALF_OPEN, a
    cluster refused for good."""
    health, t0 = _health(), time.time()  # the probe's own time is the clock's
    assert health.check(cluster_a, now=t0).reachable
    entry = health._entry(cluster_a)
    real = entry.probe

    class Raising:
        def check(self):
            raise RuntimeError("client gone")

    entry.probe = Raising()
    first = health.check(cluster_a, now=t0 + 100)  # past the probe interval: probed, and it raises
    assert not first.reachable and "the probe failed: RuntimeError('client gone')" in first.error
    assert health.check(cluster_a, now=t0 + 101).confirmed  # the second failure opens the breaker
    trial = health.check(cluster_a, now=t0 + 200)  # past the backoff: a trial, which raises too
    assert trial.confirmed and "client gone" in trial.error
    assert (entry.state.phase, entry.state.openings) == (BreakerPhase.OPEN, 2)  # open again, pause doubled
    entry.probe = real
    assert health.check(cluster_a, now=entry.state.retry_at).reachable  # its next trial runs, and closes it


def test_unreachable_cluster_faults_the_flow_and_its_return_recovers_it(make_flow):
    flow = make_flow(topics=["orders"])
    reason = runtime.cluster_unreachable_reason(role="source", alias="A", error="127.0.0.1:1: refused")
    assert runtime.flow_fault_cluster_unreachable(flow_id=flow.pk, reason=reason, at=NOW)
    stored = Flow.objects.get(pk=flow.pk)
    assert (stored.state, stored.state_reason) == (
        FlowState.FAULTED,
        "source cluster A unreachable: 127.0.0.1:1: refused",
    )
    assert FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.ERROR, message=reason).exists()
    assert runtime.flow_recover_clusters_reachable(flow_id=flow.pk, at=NOW)
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE
    assert FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.INFO, message__contains=reason).exists()


def test_a_state_change_and_its_event_are_stored_together_or_not_at_all(make_flow):
    """A reader that sees the flow ACTIVE again sees why (tests/workers/test_isolation.py read the state,
    then found no event, on a loaded machine): an event that cannot be stored (no time: NOT NULL) undoes
    the state change."""
    flow = make_flow(topics=["orders"])
    reason = runtime.cluster_unreachable_reason(role="source", alias="A", error="127.0.0.1:1: refused")
    with pytest.raises(IntegrityError):
        runtime.flow_fault_cluster_unreachable(flow_id=flow.pk, reason=reason, at=None)
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE
    assert runtime.flow_fault_cluster_unreachable(flow_id=flow.pk, reason=reason, at=NOW)
    with pytest.raises(IntegrityError):
        runtime.flow_recover_clusters_reachable(flow_id=flow.pk, at=None)
    assert Flow.objects.get(pk=flow.pk).state == FlowState.FAULTED
    assert not FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.INFO).exists()


def test_a_flow_faulted_for_another_reason_is_not_recovered_by_reachable_clusters(make_flow):
    flow = make_flow(topics=["orders"])
    lifecycle.fault(flow_id=flow.pk, reason="data loss on orders[0]: partition stopped")
    assert not runtime.flow_recover_clusters_reachable(flow_id=flow.pk, at=NOW)
    assert Flow.objects.get(pk=flow.pk).state == FlowState.FAULTED


def test_a_paused_flow_gets_the_event_but_keeps_its_state(make_flow):
    flow = make_flow(topics=["orders"])
    lifecycle.pause(flow=flow)
    reason = runtime.cluster_unreachable_reason(role="target", alias="B", error="timed out")
    assert not runtime.flow_fault_cluster_unreachable(flow_id=flow.pk, reason=reason, at=NOW)
    assert Flow.objects.get(pk=flow.pk).state == FlowState.PAUSED
