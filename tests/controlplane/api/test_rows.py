"""Lists answered by `RowsSerializer` (issue 38 item 4: the flows API's CPU) are DRF's answer to the byte:
the same JSON as DRF's own `ListSerializer` over the same items, for the API's lists and for every way a
field can read its value (a method, a dotted source, a missing attribute with a default, with null or
left out, a callable, a Mapping item)."""

from __future__ import annotations

import datetime
import json
import zoneinfo

import pytest
from django.utils import timezone
from rest_framework import serializers

from controlplane.api import serializers as s
from controlplane.api.rows import RowsSerializer
from controlplane.flows import services
from controlplane.flows.models import Flow
from controlplane.status import partitions, rollup
from controlplane.status.models import FlowEvent
from tests.status_reports import stored_report


def _same_as_drf(serializer_class, items, **context) -> list:
    fast = serializer_class(items, many=True, context=context)
    assert isinstance(fast, RowsSerializer)
    drf = serializers.ListSerializer(child=serializer_class(), context=context)
    answer = json.dumps(fast.data)
    assert answer == json.dumps(drf.to_representation(items))
    return json.loads(answer)


@pytest.mark.django_db
def test_the_api_lists_answer_as_drf_does(admin_user, two_clusters):
    a, b = two_clusters
    plain = services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    services.flow_create(
        actor=admin_user,
        source=b,
        target=a,
        enabled=False,
        topics=["orders.*", "payments"],
        extra={"producer.linger.ms": "20"},
        pool="east",
    )
    flows = list(Flow.objects.select_related("source", "target").order_by("pk"))
    answer = _same_as_drf(s.FlowSerializer, flows)
    assert [row["pool"] for row in answer] == ["", "east"] and answer[1]["extra"]
    assert _same_as_drf(s.ClusterSerializer, [a, b])[0]["secrets_set"] == []

    for partition in range(3):
        stored_report(
            flow=plain,
            topic="orders",
            partition=partition,
            records_behind=partition or None,
            seconds_behind=None,
            observed_at=timezone.now(),
        )
    FlowEvent.objects.create(flow=plain, at=timezone.now(), kind="warning", message="slow")
    status = rollup.flow_status(flow=plain)
    page = partitions.partition_page(flow=plain, budget=status.budget)
    assert len(_same_as_drf(s.PartitionLiveSerializer, page.partitions)) == 3
    assert _same_as_drf(s.FlowEventSerializer, status.events, role="viewer")[0]["message"] == "slow"
    assert _same_as_drf(s.FlowSummarySerializer, rollup.flow_summaries())[0]["id"] == plain.pk


class Item:
    def __init__(self, **attributes):
        vars(self).update(attributes)


class Keyed(dict):
    """A Mapping with an attribute of a key's name: DRF reads the key."""

    plain = -1


class EveryRead(serializers.Serializer):
    plain = serializers.IntegerField()
    dotted = serializers.CharField(source="inner.name")
    method = serializers.SerializerMethodField()
    defaulted = serializers.CharField(default="d")
    nullable = serializers.CharField(allow_null=True)
    optional = serializers.CharField(required=False)
    called = serializers.CharField()
    empty = serializers.CharField(allow_null=True)
    at = serializers.DateTimeField(allow_null=True)
    at_paris = serializers.DateTimeField(default_timezone=zoneinfo.ZoneInfo("Europe/Paris"))
    at_formatted = serializers.DateTimeField(format="%Y-%m-%d %H:%M")

    class Meta:
        list_serializer_class = RowsSerializer

    def get_method(self, item) -> str:
        return f"m{item.plain if not isinstance(item, dict) else item['plain']}"


def test_every_way_a_field_reads_answers_as_drf_does():
    utc = datetime.datetime(2026, 12, 2, 6, 30, 5, 123456, tzinfo=datetime.UTC)
    summer = datetime.datetime(2026, 7, 1, 23, 59, tzinfo=zoneinfo.ZoneInfo("America/New_York"))
    naive = datetime.datetime(2026, 3, 29, 1, 30)  # Paris moves its clocks that night
    times = {"at_paris": utc, "at_formatted": utc}
    items = [
        Item(plain=1, inner=Item(name="x"), called=lambda: "c", empty=None, at=utc, **times),
        Item(
            plain=2,
            inner=Item(name="y"),
            defaulted="set",
            nullable="n",
            optional="o",
            called="v",
            empty="",
            at=summer,
            at_paris=summer,
            at_formatted=summer,
        ),
        Keyed(
            plain=3, inner={"name": "z"}, called="k", empty=None, at=None, at_paris=naive, at_formatted=naive
        ),
        Item(
            plain=4,
            inner=Item(name="w"),
            called="t",
            empty=None,
            at=naive,
            at_paris="2026-01-01",
            at_formatted=utc,
        ),
    ]
    answer = _same_as_drf(EveryRead, items)
    assert answer[0] == {
        "plain": 1,
        "dotted": "x",
        "method": "m1",
        "defaulted": "d",
        "nullable": None,
        "called": "c",
        "empty": None,
        "at": "2026-12-02T06:30:05.123456Z",
        "at_paris": "2026-12-02T07:30:05.123456+01:00",
        "at_formatted": "2026-12-02 06:30",
    }
    assert answer[1]["optional"] == "o" and answer[2]["plain"] == 3
    assert (answer[1]["at"], answer[1]["at_paris"]) == ("2026-07-02T03:59:00Z", "2026-07-02T05:59:00+02:00")
    with timezone.override(zoneinfo.ZoneInfo("Asia/Kolkata")):  # the request's zone, when one is activated
        assert _same_as_drf(EveryRead, items)[0]["at"] == "2026-12-02T12:00:05.123456+05:30"


@pytest.mark.parametrize(
    "serializer_class",
    [s.ClusterSerializer, s.FlowSerializer, s.PartitionLiveSerializer, s.FlowEventSerializer],
)
def test_fields_built_once_are_the_fields_drf_builds_for_each_instance(serializer_class):
    def shown(fields) -> dict[str, str]:  # a DRF field's repr is its class and every argument it was given
        return {name: repr(field) for name, field in fields.items()}

    drf = shown(serializers.ModelSerializer.get_fields(serializer_class()))
    first, second = serializer_class().get_fields(), serializer_class().get_fields()
    assert shown(first) == drf and shown(second) == drf
    assert not any(field is second[name] for name, field in first.items())  # each instance its own copy
