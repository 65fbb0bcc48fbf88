"""How long an at_least_once batch's delivery report vouches for the records before it, and how long a
settle flushes: both from the task producer's message timeout as the flow, the cluster or we set it;
and the largest record it accepts (`replication.kafka.source_io`; why: docs/delivery-guarantees.md)."""

from __future__ import annotations

import math

import pytest

from replication.config import ClusterConfig, DeliveryGuarantee, FlowConfig
from replication.kafka import source_io
from replication.kafka.source_io import batch_reports_within_s, message_timeout_s, settle_timeout_s

TARGET = ClusterConfig(alias="B", bootstrap_servers="127.0.0.1:1")


@pytest.mark.parametrize(
    ("flow_extra", "cluster_producer", "timeout_s"),
    [
        ({}, {}, 120.0),  # ours (MESSAGE_TIMEOUT_MS)
        ({"producer.message.timeout.ms": "300000"}, {}, 300.0),  # the flow's
        ({}, {"delivery.timeout.ms": "60000"}, 60.0),  # the cluster's, by librdkafka's alias
        ({"producer.delivery.timeout.ms": "30000"}, {"message.timeout.ms": "90000"}, 30.0),  # the shorter
        ({"producer.message.timeout.ms": "0"}, {}, math.inf),  # no timeout
    ],
)
def test_the_window_and_the_settle_follow_the_producers_message_timeout(
    flow_extra, cluster_producer, timeout_s
):
    flow = FlowConfig(source="A", target="B", extra=flow_extra)
    target = ClusterConfig(alias="B", bootstrap_servers="127.0.0.1:1", producer=cluster_producer)
    assert message_timeout_s(flow, target) == timeout_s
    assert batch_reports_within_s(timeout_s) == timeout_s * source_io.REPORT_TRUST
    expected_settle = source_io.SETTLE_TIMEOUT_S if math.isinf(timeout_s) else timeout_s + 10
    assert settle_timeout_s(timeout_s) == expected_settle


def test_only_a_gapless_producer_outside_transactions_has_the_window():
    at_least_once = FlowConfig(source="A", target="B")
    in_transactions = FlowConfig(source="A", target="B", delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    overrides = source_io.mirror_producer_overrides(at_least_once, TARGET, task_index=0)
    assert overrides["enable.gapless.guarantee"] is True and overrides["enable.idempotence"] is True
    assert "enable.gapless.guarantee" not in source_io.mirror_producer_overrides(
        in_transactions, TARGET, task_index=0
    )


@pytest.mark.parametrize(
    ("flow_extra", "cluster_producer", "limit"),
    [
        ({}, {}, 1_000_000),  # librdkafka's default
        ({}, {"message.max.bytes": "2000000"}, 2_000_000),  # the cluster's
        ({"producer.message.max.bytes": "500000"}, {"message.max.bytes": "2000000"}, 500_000),  # the flow's
    ],
)
def test_the_record_limit_follows_the_producers_message_max_bytes(flow_extra, cluster_producer, limit):
    flow = FlowConfig(source="A", target="B", extra=flow_extra)
    target = ClusterConfig(alias="B", bootstrap_servers="127.0.0.1:1", producer=cluster_producer)
    assert source_io.record_limit_bytes(flow, target) == limit
