"""A flow's metadata run on the embedded brokers (no authorizer) reports "ACL sync unsupported by cluster X"
as a flow warning, once per cluster, however often the run repeats and whichever process runs it."""

from __future__ import annotations

import pytest

from controlplane.models import FlowEvent, FlowEventKind
from workers import metadata

pytestmark = [pytest.mark.kafka]


def test_acl_sync_unsupported_is_a_warning_event_reported_once(make_flow, redis_url, unique_name):
    flow = make_flow(topics=[f"{unique_name}.*"], sync_topic_acls_interval_seconds=1)
    try:
        metadata.flow_metadata(flow_id=flow.pk, token="test")
        metadata._CACHE[flow.pk].topic_sync._scheduler._last_run.clear()  # every job due again
        metadata.flow_metadata(flow_id=flow.pk, token="test")
        metadata._entry(None, flow.pk)  # as another worker process: a fresh cache entry
        metadata.flow_metadata(flow_id=flow.pk, token="test")
    finally:
        metadata._entry(None, flow.pk)
    warnings = FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.WARNING)
    assert sorted(warnings.values_list("message", flat=True)) == [
        f"ACL sync unsupported by cluster {alias}: it has no authorizer (DescribeCluster returns no "
        "authorized operations); topic ACLs are not synced"
        for alias in ("A", "B")
    ]
    assert not FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.ERROR).exists()


def test_no_acl_warning_when_acl_sync_is_disabled(make_flow, redis_url, unique_name):
    flow = make_flow(topics=[f"{unique_name}.*"], sync_topic_acls_enabled=False)
    try:
        metadata.flow_metadata(flow_id=flow.pk, token="test")
    finally:
        metadata._entry(None, flow.pk)
    assert not FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.WARNING).exists()
