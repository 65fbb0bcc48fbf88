"""A fleet of flows as the workers leave them, stored straight into the database: what the control plane's
benchmarks (`bench.metrics_scrape`, `bench.api_load`) read."""

from __future__ import annotations

import itertools


def seed_fleet(*, flows: int, partitions: int) -> list:
    """`flows` enabled, active flows between generated clusters (`dc000`, `dc001`, ...) with `partitions`
    fresh status rows each on topic `orders`, each flow's task roll-up (as the workers write them), an RPO
    budget and runtime signals; one flow in ten is 90 s behind (over its budget). Returns the flows."""
    from django.utils import timezone

    from controlplane.flows.models import Cluster, Flow, FlowState
    from controlplane.status import partition_writes
    from controlplane.status.models import FlowPartitionStatus, FlowRpoBudget, FlowSignals, FlowTaskStatus

    clusters_needed = next(n for n in itertools.count(2) if n * (n - 1) >= flows)
    clusters = Cluster.objects.bulk_create(
        Cluster(alias=f"dc{index:03d}", bootstrap_servers=f"dc{index:03d}:9092")
        for index in range(clusters_needed)
    )
    pairs = itertools.islice(((a, b) for a in clusters for b in clusters if a.pk != b.pk), flows)
    stored = Flow.objects.bulk_create(
        Flow(source=a, target=b, enabled=True, state=FlowState.ACTIVE, topics=["orders"]) for a, b in pairs
    )
    now = timezone.now()
    rows = FlowPartitionStatus.objects.bulk_create(
        FlowPartitionStatus(
            flow=flow,
            topic="orders",
            partition=p,
            remote_topic=f"{flow.source.alias}.orders",
            source_end_offset=1000 + p,
            replicated_offset=990,
            records_behind=10 + p,
            seconds_behind=90.0 if index % 10 == 0 else 0.5,
            record_age_ms=120,
            replication_latency_ms=30,
            latency_counts=[0, 0, 4000, 900, 90, 10, 0, 0, 0, 0, 0, 0, 0, 0],
            latency_sum_ms=5000 * 30.0,
            record_count=5000,
            byte_count=500_000,
            state="OK",
            observed_at=now,
        )  # fmt: skip
        for index, flow in enumerate(stored)
        for p in range(partitions)
    )
    # Each flow's task roll-up, as its worker writes it every slice (what the summaries read).
    FlowTaskStatus.objects.bulk_create(
        partition_writes.task_status(
            rows[index * partitions : (index + 1) * partitions],
            flow_id=flow.pk,
            task_index=0,
            task_error=None,
            at=now,
        )
        for index, flow in enumerate(stored)
    )
    FlowRpoBudget.objects.bulk_create(FlowRpoBudget(flow=flow, records_behind=100_000) for flow in stored)
    FlowSignals.objects.bulk_create(
        FlowSignals(
            flow=flow,
            heartbeat_emitted_at=now,
            checkpoint_emitted_at=now,
            offset_sync_emitted_at=now,
            records_replicated_at=now,
            tasks_planned=1,
            tasks_leased=1,
            tasks_observed_at=now,
        )
        for flow in stored
    )
    return stored
