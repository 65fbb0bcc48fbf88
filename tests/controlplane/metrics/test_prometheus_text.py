"""`controlplane.metrics.text.render_text` writes exactly what prometheus-client's `generate_latest` writes."""

from __future__ import annotations

import pytest
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from controlplane.assurance.models import PartitionVerification
from controlplane.flows import services
from controlplane.metrics.prometheus import MirrorplaneCollector
from controlplane.metrics.text import HistogramSeries, LabelSet, Series, render_text
from tests.status_reports import stored_report


class Fixed:
    def __init__(self, families) -> None:
        self.families = families

    def collect(self):
        return iter(self.families)


def library_text(families) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed(families))
    return generate_latest(registry).decode()


def families():
    gauge = GaugeMetricFamily("mirrorplane_g", 'a "doc" with \\ and\nnewline', labels=["flow", "topic"])
    gauge.add_metric(["A->B", 'we"ird\\name\nx'], 1.5)
    gauge.add_metric(["A->B", "orders"], 1e21)
    gauge.add_metric(["A->B", "inf"], float("inf"))
    counter = CounterMetricFamily("mirrorplane_c", "a counter", labels=["worker"])
    counter.add_metric(["w1@host"], 12)
    bare = GaugeMetricFamily("mirrorplane_bare", "no labels")
    bare.add_metric([], 0.25)
    histogram = HistogramMetricFamily("mirrorplane_h_seconds", "a histogram", labels=["flow"])
    histogram.add_metric(["A->B"], [("0.005", 1), ("0.1", 3), ("+Inf", 4)], 0.3)
    return [gauge, counter, bare, histogram, GaugeMetricFamily("mirrorplane_empty", "no samples")]


def test_the_text_is_the_librarys_for_every_kind_of_family_and_awkward_label_values():
    assert render_text(families()) == library_text(families())


def our_families():
    """`families()` built as the collector builds them: rows of label sets, some made once and shared."""
    gauge = Series("mirrorplane_g", 'a "doc" with \\ and\nnewline', "gauge", labels=["flow", "topic"])
    gauge.add_metric(LabelSet(["flow", "topic"], ["A->B", 'we"ird\\name\nx']), 1.5)
    gauge.add_metric(["A->B", "orders"], 1e21)
    gauge.add_metric(LabelSet(["topic", "flow"], ["inf", "A->B"]), float("inf"))
    counter = Series("mirrorplane_c", "a counter", "counter", labels=["worker"])
    counter.add_metric(["w1@host"], 12)
    bare = Series("mirrorplane_bare", "no labels", "gauge", labels=[])
    bare.add_metric([], 0.25)
    histogram = HistogramSeries("mirrorplane_h_seconds", "a histogram", labels=["flow"])
    histogram.add_metric(LabelSet(["flow"], ["A->B"]), [("0.005", 1), ("0.1", 3), ("+Inf", 4)], 0.3)
    return [gauge, counter, bare, histogram, Series("mirrorplane_empty", "no samples", "gauge", labels=[])]


def test_families_kept_as_label_set_rows_are_the_librarys_families_sample_for_sample_and_byte_for_byte():
    for ours, library in zip(our_families(), families(), strict=True):
        assert (ours.name, ours.type, ours.documentation) == (
            library.name,
            library.type,
            library.documentation,
        )
        assert ours.samples == library.samples
    assert render_text(our_families()) == library_text(families())


def test_a_label_set_adds_a_label_in_its_sorted_place_and_splits_around_one():
    flow = LabelSet(["flow", "source", "target"], ["A->B", "A", 'B"'])
    assert flow.text == 'flow="A->B",source="A",target="B\\""'
    assert flow.plus("health", "ok").text == 'flow="A->B",health="ok",source="A",target="B\\""'
    assert flow.plus("zone", "z").as_dict() == {"flow": "A->B", "source": "A", "target": 'B"', "zone": "z"}
    assert flow.around("le") == ('flow="A->B",', ',source="A",target="B\\""')
    assert LabelSet(["flow"], ["x"]).around("le") == ('flow="x",', "")
    assert LabelSet([], []).around("le") == ("", "")


@pytest.mark.django_db
def test_the_text_is_the_librarys_for_the_whole_collector(admin_user):
    a = services.cluster_create(actor=admin_user, alias="A", bootstrap_servers="127.0.0.1:1")
    b = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers="127.0.0.1:2")
    flow = services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    stored_report(
        flow=flow, topic="orders", partition=0, remote_topic="A.orders", source_end_offset=120,
        replicated_offset=100, records_behind=20, seconds_behind=3.5, record_age_ms=1500,
        replication_latency_ms=40, latency_counts=[1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4],
        latency_sum_ms=99.0, record_count=100, byte_count=2000, state="OK", observed_at=timezone.now(),
    )  # fmt: skip
    for partition, (state, behind, age_ms, count) in enumerate(
        [("ERR", None, None, 2_000_000), ("OK", 10**17, 7, -3), ("WARN", 0, 10**6, 999_999)], start=1
    ):  # unknown figures, whole numbers written in exponent form or not, per-partition series from columns
        stored_report(
            flow=flow, topic="payments", partition=partition, records_behind=behind, record_age_ms=age_ms,
            record_count=count, state=state, observed_at=timezone.now(),
        )  # fmt: skip
    PartitionVerification.objects.create(
        flow=flow, topic="orders", partition=0, status="mismatch", verified_up_to=7
    )
    PartitionVerification.objects.create(flow=flow, topic="payments", partition=1, status="ok")
    collected = list(MirrorplaneCollector().collect())
    text = render_text(collected)
    assert "mirrorplane_record_replication_latency_seconds_bucket" in text
    assert 'mirrorplane_verification_mismatch{flow="A->B",partition="0",topic="orders"} 1.0' in text
    assert 'mirrorplane_partition_state{flow="A->B",partition="1",state="ERR",topic="payments"} 1.0' in text
    assert 'mirrorplane_records_replicated_total{flow="A->B",partition="1",topic="payments"} 2e+06' in text
    assert text == library_text(collected)
