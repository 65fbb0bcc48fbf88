"""/metrics per partition (MM2's names) or per topic for large flows (MIRRORPLANE_METRICS_PARTITION_LEVEL),
the per-topic families summed right, and a scrape's reads of the status rows counted."""

from __future__ import annotations

import gc
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from controlplane.alerts.models import Alert, AlertRule
from controlplane.assurance.models import PartitionVerification
from controlplane.flows import services
from controlplane.flows.models import Cluster, Flow, FlowState
from controlplane.metrics import prometheus
from controlplane.status import partition_writes
from controlplane.status.models import (
    FlowEvent,
    FlowEventKind,
    FlowPartitionStatus,
    FlowRpoBudget,
    FlowSignals,
    FlowTaskStatus,
    PartitionState,
)
from replication.config import SchemaIdMode
from tests.status_reports import status_rows_read, task_rollup_rebuild

pytestmark = pytest.mark.django_db

LATENCY = [1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4]  # 14 buckets: replication.metrics' layout


@pytest.fixture
def flows(admin_user, settings):
    """A->B with 2,000 partitions over topics orders (1,200) and payments (800), B->A with 3 partitions."""
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    a = services.cluster_create(actor=admin_user, alias="A", bootstrap_servers="127.0.0.1:1")
    b = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers="127.0.0.1:2")
    big = services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    small = services.flow_create(actor=admin_user, source=b, target=a, enabled=True)
    now = timezone.now()
    rows = [
        FlowPartitionStatus(
            flow=big,
            topic="orders" if p < 1200 else "payments",
            partition=p,
            remote_topic="A.t",
            records_behind=p % 5,
            seconds_behind=p / 1000,
            record_age_ms=p,
            replication_latency_ms=2 * p,
            record_count=10,
            byte_count=1000,
            latency_counts=LATENCY,
            latency_sum_ms=7.0,
            state=PartitionState.ERR if p == 7 else PartitionState.OK,
            observed_at=now - timedelta(seconds=600 if p in (1300, 1301) else 1),
            task_index=1 if p in (1300, 1301) else 0,  # task 1 stopped reporting 10 minutes ago
        )  # fmt: skip
        for p in range(2000)
    ]
    rows += [
        FlowPartitionStatus(
            flow=small,
            topic="back",
            partition=p,
            remote_topic="B.back",
            records_behind=p,
            seconds_behind=1.0,
            record_count=5,
            byte_count=50,
            state=PartitionState.OK,
            observed_at=now,
        )  # fmt: skip
        for p in range(3)
    ]
    FlowPartitionStatus.objects.bulk_create(rows)
    for flow, task_index in ((big, 0), (big, 1), (small, 0)):
        task_rollup_rebuild(flow_id=flow.pk, task_index=task_index)
    PartitionVerification.objects.bulk_create(
        PartitionVerification(
            flow=row.flow,
            topic=row.topic,
            partition=row.partition,
            verified_from=0,
            verified_up_to=90,
            status="mismatch" if row.partition in (3, 4, 5) else "ok",
            bytes_read=10,
            checked_at=now,
        )  # fmt: skip
        for row in rows
    )
    return big, small


def scrape() -> dict[tuple[str, tuple], float]:
    """Every sample of the exposition: (name, sorted labels) -> value."""
    text = prometheus.exposition().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def series(samples, name: str, **labels) -> dict[tuple, float]:
    return {
        key: value
        for key, value in samples.items()
        if key[0] == name and all((k, v) in key[1] for k, v in labels.items())
    }


def value(samples, name: str, **labels) -> float:
    (found,) = series(samples, name, **labels).values()
    return found


def test_per_topic_the_series_are_per_topic_and_sum_right(flows, settings):
    settings.MIRRORPLANE_METRICS_PARTITION_LEVEL = "topic"
    samples = scrape()
    for name in ("records_behind", "seconds_behind", "records_replicated_total", "partition_state"):
        assert not series(samples, f"mirrorplane_{name}"), name  # no series per partition, of any flow
    orders, payments = range(1200), range(1200, 2000)
    assert value(samples, "mirrorplane_topic_records_behind", flow="A->B", topic="orders") == sum(
        p % 5 for p in orders
    )
    assert value(samples, "mirrorplane_topic_records_behind", flow="A->B", topic="payments") == sum(
        p % 5 for p in payments
    )
    assert value(samples, "mirrorplane_topic_seconds_behind", flow="A->B", topic="payments") == 1.999
    assert value(samples, "mirrorplane_topic_record_age_seconds", flow="A->B", topic="orders") == 1.199
    assert (
        value(samples, "mirrorplane_topic_replication_latency_seconds", flow="A->B", topic="orders") == 2.398
    )
    assert value(samples, "mirrorplane_topic_records_replicated_total", flow="A->B", topic="orders") == 12_000
    assert (
        value(samples, "mirrorplane_topic_bytes_replicated_total", flow="A->B", topic="payments") == 800_000
    )
    assert value(samples, "mirrorplane_topic_bytes_behind", flow="A->B", topic="orders") == 100 * sum(
        p % 5 for p in orders
    )
    states = series(samples, "mirrorplane_topic_partitions", flow="A->B")
    assert {dict(key[1])["topic"] + "/" + dict(key[1])["state"]: v for key, v in states.items()} == {
        "orders/ERR": 1,
        "orders/OK": 1199,
        "payments/OK": 798,
        "payments/STALE": 2,
    }
    assert value(samples, "mirrorplane_topic_status_age_seconds", flow="A->B", topic="payments") >= 600
    # The flow's latency histogram: every partition's counts summed (in SQL).
    assert value(samples, "mirrorplane_record_replication_latency_seconds_count", flow="A->B") == 2000 * 10
    assert (
        value(samples, "mirrorplane_record_replication_latency_seconds_bucket", flow="A->B", le="0.005")
        == 2000
    )
    assert (
        value(samples, "mirrorplane_record_replication_latency_seconds_sum", flow="A->B") == 2000 * 7.0 / 1000
    )
    assert value(samples, "mirrorplane_topic_records_behind", flow="B->A", topic="back") == 3
    assert value(samples, "mirrorplane_topic_verification_mismatches", flow="A->B", topic="orders") == 3
    assert value(samples, "mirrorplane_topic_verification_mismatches", flow="A->B", topic="payments") == 0
    assert value(samples, "mirrorplane_verification_bytes_read_total", flow="A->B") == 2000 * 10
    assert not series(samples, "mirrorplane_verification_mismatch") and not series(
        samples, "mirrorplane_verified_up_to_offset"
    )


def test_per_partition_mm2s_names_as_before(flows, settings):
    settings.MIRRORPLANE_METRICS_PARTITION_LEVEL = "partition"
    samples = scrape()
    assert len(series(samples, "mirrorplane_records_behind", flow="A->B")) == 2000
    assert value(samples, "mirrorplane_records_behind", flow="A->B", topic="orders", partition="9") == 4
    assert (
        value(samples, "mirrorplane_seconds_behind", flow="A->B", topic="payments", partition="1999") == 1.999
    )
    assert (
        value(samples, "mirrorplane_record_age_seconds", flow="A->B", topic="orders", partition="500") == 0.5
    )
    assert value(samples, "mirrorplane_replication_latency_seconds", flow="A->B", partition="500") == 1.0
    assert value(samples, "mirrorplane_records_replicated_total", flow="A->B", partition="3") == 10
    assert value(samples, "mirrorplane_bytes_replicated_total", flow="B->A", partition="2") == 50
    assert value(samples, "mirrorplane_partition_state", flow="A->B", partition="1300", state="STALE") == 1
    assert value(samples, "mirrorplane_partition_state", flow="A->B", partition="7", state="ERR") == 1
    assert (
        value(samples, "mirrorplane_verification_mismatch", flow="A->B", topic="orders", partition="4") == 1
    )
    assert value(samples, "mirrorplane_verified_up_to_offset", flow="B->A", partition="2") == 90
    assert len(series(samples, "mirrorplane_partition_state", flow="A->B")) == 2000  # one state each
    assert value(samples, "mirrorplane_topic_records_behind", flow="A->B", topic="orders") == sum(
        p % 5 for p in range(1200)
    )  # the per-topic families are there for every flow


def test_auto_exports_large_flows_per_topic_and_small_ones_per_partition(flows, settings):
    settings.MIRRORPLANE_METRICS_PARTITION_LEVEL = "auto"
    settings.MIRRORPLANE_METRICS_PARTITION_LIMIT = 1000
    samples = scrape()
    assert not series(samples, "mirrorplane_records_behind", flow="A->B")
    assert len(series(samples, "mirrorplane_records_behind", flow="B->A")) == 3
    assert value(samples, "mirrorplane_partition_state", flow="B->A", partition="1", state="OK") == 1


def test_a_per_topic_scrape_reads_rows_per_topic_and_a_per_partition_scrape_one_read_of_the_rows(
    flows, settings
):
    """Counted: the rows the statements reading status rows return, and those statements."""
    settings.MIRRORPLANE_METRICS_PARTITION_LEVEL = "topic"
    with status_rows_read() as read:
        prometheus.exposition()
    assert read["rows"] <= 3 * 2 * 3, read  # 3 topics, 2 tasks: the per-topic roll-ups; not 2,003 rows
    with status_rows_read("controlplane_partitionverification") as verifications:
        prometheus.exposition()
    assert verifications["rows"] <= 20, verifications  # roll-ups per flow, the mismatching rows: not 2,003
    settings.MIRRORPLANE_METRICS_PARTITION_LEVEL = "partition"
    with CaptureQueriesContext(connection) as queries:
        prometheus.exposition()
    reads = [  # not roll-ups (GROUP BY) nor distinct topics (the readiness score's)
        q["sql"]
        for q in queries
        if "controlplane_flowpartitionstatus" in q["sql"]
        and not {"GROUP", "DISTINCT"} & set(q["sql"].split())
    ]
    assert len(reads) == 1, reads  # the rows of the flows exported per partition, once, as values


def _flows_of_every_kind(count: int, *, first: int) -> None:
    """`count` flows of 2 topics x 2 partitions over 2 tasks (task 1 silent: its rows STALE), each syncing
    schemas, with runtime signals, an RPO budget, verification rows (a mismatch in one flow of ten), a
    data-loss gap and an error event, and a firing alert: every per-flow read a scrape makes."""
    now = timezone.now()
    clusters = Cluster.objects.bulk_create(
        Cluster(alias=f"C{index}", bootstrap_servers="127.0.0.1:1")
        for index in range(first, first + count + 1)
    )
    flows = Flow.objects.bulk_create(
        Flow(
            source=clusters[0],
            target=target,
            enabled=True,
            state=FlowState.ACTIVE,
            topics=["orders", "payments"],
            schemas_sync_mode=SchemaIdMode.REWRITE_IDS,
        )
        for target in clusters[1:]
    )
    rows = FlowPartitionStatus.objects.bulk_create(
        FlowPartitionStatus(
            flow=flow,
            topic=topic,
            partition=partition,
            remote_topic=topic,
            task_index=partition,
            records_behind=partition,
            seconds_behind=float(partition),
            record_count=10,
            byte_count=100,
            latency_counts=LATENCY,
            observed_at=now - timedelta(seconds=600 * partition),
        )
        for flow in flows
        for topic in ("orders", "payments")
        for partition in (0, 1)
    )
    FlowTaskStatus.objects.bulk_create(
        partition_writes.task_status(
            [
                partition_writes.StatusFigures.of_row(row)
                for row in rows
                if (row.flow_id, row.task_index) == (flow.pk, task)
            ],
            flow_id=flow.pk,
            task_index=task,
            task_error=None,
            at=now - timedelta(seconds=600 * task),
        )
        for flow in flows
        for task in (0, 1)
    )
    FlowSignals.objects.bulk_create(
        FlowSignals(
            flow=flow,
            heartbeat_emitted_at=now,
            offset_sync_emitted_at=now,
            tasks_planned=2,
            tasks_leased=1,
            schemas_synced_at=now,
            schemas_subjects=4,
            schemas_versions_behind=1,
            schemas_errors=1,
        )
        for flow in flows
    )
    FlowRpoBudget.objects.bulk_create(FlowRpoBudget(flow=flow, records_behind=1) for flow in flows)
    PartitionVerification.objects.bulk_create(
        PartitionVerification(
            flow_id=row.flow_id,
            topic=row.topic,
            partition=row.partition,
            verified_from=0,
            verified_up_to=10,
            status="mismatch" if row.flow_id % 10 == 0 and row.partition == 1 else "ok",
            checked_at=now,
        )
        for row in rows
    )
    FlowEvent.objects.bulk_create(
        FlowEvent(flow=flow, at=now, kind=kind, message="x", first_offset=0, last_offset=9)
        for flow in flows
        for kind in (FlowEventKind.DATA_LOSS_GAP, FlowEventKind.ERROR)
    )
    Alert.objects.bulk_create(Alert(flow=flow, rule=AlertRule.RPO_RECORDS, fired_at=now) for flow in flows)


@pytest.mark.parametrize("level", ["partition", "topic"])
def test_a_scrapes_statements_do_not_grow_with_the_flows(level, settings):
    """500 flows of 10 partitions took 4-6 s to scrape while the live RPO read its topics flow by flow,
    and 1.2-2.1 s while each flow syncing schemas read its signals (a statement per flow)."""
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    settings.MIRRORPLANE_METRICS_PARTITION_LEVEL = level
    _flows_of_every_kind(50, first=0)
    with CaptureQueriesContext(connection) as few:
        prometheus.exposition()
    _flows_of_every_kind(450, first=100)
    with CaptureQueriesContext(connection) as many:
        samples = scrape()
    assert len(many.captured_queries) == len(few.captured_queries), [
        q["sql"][:120] for q in many.captured_queries
    ]
    # Every flow's figures are in it: its schema sync, stale partitions, mismatch and alert.
    assert len(series(samples, "mirrorplane_flow_schema_sync_errors")) == 500
    assert len(series(samples, "mirrorplane_topic_partitions", state="STALE")) == 1000
    assert sum(series(samples, "mirrorplane_topic_verification_mismatches").values()) == 100
    assert len(series(samples, "mirrorplane_alerts_firing")) == 500
    # Its short-lived objects are freed by reference counting: the cycle collector does not run during a
    # scrape (245 collections did, about 40% of a 500-flow scrape's CPU), only the one due once it is on
    # again after it.
    collections = []
    gc.collect()  # the allocation counts start from zero: none is due before the scrape begins
    gc.callbacks.append(
        lambda phase, info: collections.append(info["generation"]) if phase == "start" else None
    )
    try:
        prometheus.exposition()
    finally:
        gc.callbacks.pop()
    assert len(collections) <= 1 and gc.isenabled()
