"""A consumer group's offset reset by shift, to an offset, to a time and to the end, and its deletion, as
kafka-consumer-groups.sh does them, through the real views and API. Dry run first (current -> new and the
lag change, nothing written), offsets kept within [log start, end], refused while the group has members
(409 naming their count), operator role (a viewer refused and audited), every bad input a 400 naming its
field: rules, tested on the in-memory cluster (`memory_clusters`). An applied reset and a deletion run on
the suite's Apache Kafka brokers, with a group a real consumer committed: the Kafka path."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from confluent_kafka import TopicPartition
from django.urls import reverse

from controlplane.core.models import AuditEvent
from controlplane.flows import cluster_reads
from controlplane.flows.clusters import clusters
from replication.config import ClusterConfig
from replication.consumer_groups import GroupMember
from replication.kafka.clients import make_consumer
from tests.web.mirroring import keyed_around_a_moment, stored_cluster

pytestmark = pytest.mark.django_db

PARTITIONS = 3
BEFORE, AFTER = 5, 5  # records per partition produced before and after the moment `topic` returns
END = BEFORE + AFTER
COMMITTED = {0: 4, 1: 6, 2: 8}
MOMENT_MS = 1_700_000_000_000


@dataclass(frozen=True)
class On:
    """The cluster `A` a test reads: its config, its stored row, a topic of 10 records in each of 3
    partitions (the first 5 before `moment_ms`, 5 after) and a group that committed COMMITTED there."""

    config: ClusterConfig
    cluster: object
    topic: str
    moment_ms: int
    group: str

    def committed(self, group: str | None = None) -> dict[int, int]:
        admin = clusters().group_admin(self.config, timeout_s=10)
        return {p: c.offset for (_, p), c in admin.committed_offsets(group or self.group).items()}


@pytest.fixture
def memory(memory_clusters, users, unique_name) -> On:
    config = ClusterConfig(alias="A", bootstrap_servers="memory-a:9092")
    cluster = memory_clusters.cluster(config.bootstrap_servers)
    topic = f"group-changes-{unique_name}"
    cluster.create(topic, PARTITIONS)
    for partition in range(PARTITIONS):
        for index in range(END):
            moment = MOMENT_MS + (index - BEFORE + 1) * 1000 - 500  # 5 records before the moment, 5 after
            cluster.append(topic, partition, key=f"k{index}".encode(), value=b"{}", timestamp_ms=moment)
    cluster.commit(unique_name, {(topic, p): offset for p, offset in COMMITTED.items()})
    return On(config, stored_cluster(actor=users["admin"], config=config), topic, MOMENT_MS, unique_name)


@pytest.fixture(scope="module")
def kafka_topic(cluster_a):
    """(name, moment_ms): 10 records in each of 3 partitions, the first 5 before `moment_ms`, 5 after."""
    name = f"group-changes-{time.time_ns()}"
    return name, keyed_around_a_moment(cluster_a, name, partitions=PARTITIONS, before=BEFORE, after=AFTER)


@pytest.fixture
def kafka(cluster_a, kafka_topic, unique_name, users) -> On:
    """The topic on the suite's cluster A and a group a real consumer committed COMMITTED in (it then left:
    the group is EMPTY)."""
    consumer = make_consumer(cluster_a, group_id=unique_name)
    try:
        consumer.commit(
            offsets=[TopicPartition(kafka_topic[0], p, offset) for p, offset in COMMITTED.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()
    cluster_reads.reset_breakers()
    return On(cluster_a, stored_cluster(actor=users["admin"], config=cluster_a), *kafka_topic, unique_name)


def _reset(client, cluster, group, **body):
    return client.post(
        f"/api/v1/clusters/{cluster.pk}/groups/{group}/reset/", body, content_type="application/json"
    )


def _plan(response) -> list[tuple]:
    assert response.status_code == 200, response.content.decode()
    return [(row["partition"], row["current"], row["new"]) for row in response.json()["partitions"]]


def test_shift_offset_time_and_end_plan_within_the_log_and_the_dry_run_writes_nothing(client_as, memory):
    operator = client_as("operator")
    back = _reset(operator, memory.cluster, memory.group, strategy="shift", shift=-5)
    assert _plan(back) == [(0, 4, 0), (1, 6, 1), (2, 8, 3)]  # partition 0 stops at the log start
    rows = back.json()["partitions"]
    assert [(r["lag_before"], r["lag_after"], r["lag_change"]) for r in rows] == [
        (6, 10, 4),
        (4, 9, 5),
        (2, 7, 5),
    ]
    assert back.json()["lag_change"] == 14 and "before the log start 0" in rows[0]["note"]
    assert _plan(_reset(operator, memory.cluster, memory.group, strategy="shift", shift="3")) == [
        (0, 4, 7),
        (1, 6, 9),
        (2, 8, END),
    ]
    assert _plan(_reset(operator, memory.cluster, memory.group, strategy="offset", offset=7)) == [
        (0, 4, 7),
        (1, 6, 7),
        (2, 8, 7),
    ]
    past = _reset(
        operator,
        memory.cluster,
        memory.group,
        strategy="offset",
        offset=10**12,
        topic=memory.topic,
        partitions=[1],
    )
    assert (
        _plan(past) == [(1, 6, END)]
        and past.json()["partitions"][0]["note"] == f"{10**12} is past the end {END}: the end"
    )
    at_moment = _reset(
        operator, memory.cluster, memory.group, strategy="timestamp", timestamp=str(memory.moment_ms)
    )
    assert _plan(at_moment) == [(0, 4, BEFORE), (1, 6, BEFORE), (2, 8, BEFORE)]
    assert _plan(_reset(operator, memory.cluster, memory.group, strategy="latest")) == [
        (0, 4, END),
        (1, 6, END),
        (2, 8, END),
    ]
    assert memory.committed() == COMMITTED
    assert not AuditEvent.objects.filter(object_type="consumer_group").exists()  # dry runs are reads


@pytest.mark.kafka
def test_an_applied_shift_writes_only_the_chosen_partitions_and_is_audited(client_as, kafka):
    applied = _reset(
        client_as("operator"),
        kafka.cluster,
        kafka.group,
        strategy="shift",
        shift=-2,
        topic=kafka.topic,
        partitions=[0, 2],
        dry_run=False,
    )
    assert applied.json()["applied"] and _plan(applied) == [(0, 4, 2), (2, 8, 6)]
    assert kafka.committed() == {0: 2, 1: 6, 2: 6}
    event = AuditEvent.objects.get(object_type="consumer_group")
    assert (event.action, event.outcome, event.actor_name) == ("update", "success", "operator")
    assert event.before == {f"{kafka.topic}[0]": 4, f"{kafka.topic}[2]": 8}
    assert event.after == {f"{kafka.topic}[0]": 2, f"{kafka.topic}[2]": 6} and "by -2" in event.detail


BAD_RESETS = [
    ({"strategy": "shift", "shift": "ten"}, "shift", "is not a whole number"),
    ({"strategy": "shift"}, "shift", "give the records to move by"),
    ({"strategy": "offset", "offset": "-1"}, "offset", "out of range"),
    ({"strategy": "offset"}, "offset", "give the offset"),
    ({"strategy": "timestamp", "timestamp": "24/11/2026 05:30"}, "timestamp", "is not a time"),
    ({"strategy": "offset", "offset": "3", "partitions": "1"}, "partitions", "name the topic"),
    ({"strategy": "offset", "offset": "3", "partitions": "one"}, "partitions", "is not a whole number"),
    ({"strategy": "sideways"}, "strategy", "shift, offset"),
]


def test_bad_reset_input_names_the_field_in_the_page_and_the_api(client_as, memory):
    operator = client_as("operator")
    url = reverse("web:group-reset", args=["A", memory.group])
    for form, field, words in BAD_RESETS + [
        (
            {"strategy": "offset", "offset": "3", "topic": memory.topic, "partitions": "1,7"},
            "partitions",
            "7 does not exist",
        )
    ]:
        errors = operator.post(url, form | {"apply": "1"}).context["errors"]
        assert any(e.startswith(f"{field}: ") and words in e for e in errors), (form, errors)
    api = [
        ({"strategy": "shift", "shift": "ten"}, "shift"),
        ({"strategy": "shift", "shift": 1.5}, "shift"),
        ({"strategy": "offset", "offset": -1}, "offset"),
        ({"strategy": "timestamp", "timestamp": "yesterday"}, "timestamp"),
        ({"strategy": "offset", "offset": 3, "topic": memory.topic, "partitions": [5]}, "partitions"),
    ]
    for body, field in api:
        response = _reset(operator, memory.cluster, memory.group, **body, dry_run=False)
        assert response.status_code == 400 and field in response.json(), (body, response.content)
    assert (
        "3 partitions (0-2): 5 does not exist"
        in _reset(operator, memory.cluster, memory.group, **api[-1][0]).json()["partitions"][0]
    )
    assert memory.committed() == COMMITTED


@pytest.mark.kafka
def test_delete_dry_run_then_delete_is_audited(client_as, kafka):
    url = f"/api/v1/clusters/{kafka.cluster.pk}/groups/{kafka.group}/delete/"
    operator = client_as("operator")
    dry = operator.post(url, {}, content_type="application/json")
    assert dry.status_code == 200 and dry.json()["dry_run"] and not dry.json()["deleted"]
    assert [(p["partition"], p["committed"], p["lag"]) for p in dry.json()["partitions"]] == [
        (0, 4, 6),
        (1, 6, 4),
        (2, 8, 2),
    ]
    assert kafka.committed() == COMMITTED

    deleted = operator.post(url, {"dry_run": False}, content_type="application/json")
    assert deleted.status_code == 200 and deleted.json()["deleted"]
    assert kafka.group not in clusters().group_admin(kafka.config, timeout_s=10).list_groups()
    event = AuditEvent.objects.get(object_type="consumer_group")
    assert (event.action, event.outcome) == ("delete", "success")
    assert event.before == {f"{kafka.topic}[{p}]": offset for p, offset in COMMITTED.items()}

    gone = operator.post(url, {"dry_run": False}, content_type="application/json")
    assert gone.status_code == 400 and f"there is no group {kafka.group} on A" in gone.json()["group"][0]


def test_a_viewer_is_refused_and_audited_even_for_a_dry_run(client_as, memory):
    viewer = client_as("viewer")
    for path, body in (("reset", {"strategy": "shift", "shift": "not even read"}), ("delete", {})):
        response = viewer.post(
            f"/api/v1/clusters/{memory.cluster.pk}/groups/{memory.group}/{path}/",
            body,
            content_type="application/json",
        )
        assert response.status_code == 403 and "operator role" in response.json()["detail"]
    page = viewer.post(reverse("web:group-delete", args=["A", memory.group]), {"apply": "1"})
    assert page.status_code == 403
    refusals = AuditEvent.objects.filter(object_type__in=["consumer_group", "group"], outcome="refused")
    assert refusals.count() == 3 and all(e.actor_name == "viewer" for e in refusals)
    assert memory.committed() == COMMITTED


def test_a_group_with_members_is_refused_with_their_count_and_the_fix_in_the_api_and_the_page(
    client_as, memory, memory_clusters
):
    member = GroupMember("rdkafka-1", "rdkafka", "/127.0.0.1", ((memory.topic, 0),))
    memory_clusters.cluster(memory.config.bootstrap_servers).join(memory.group, member)
    operator = client_as("operator")
    reset = _reset(operator, memory.cluster, memory.group, strategy="shift", shift=-1, dry_run=False)
    delete = operator.post(
        f"/api/v1/clusters/{memory.cluster.pk}/groups/{memory.group}/delete/",
        {"dry_run": False},
        content_type="application/json",
    )
    page = operator.post(
        reverse("web:group-reset", args=["A", memory.group]),
        {"strategy": "latest", "topic": memory.topic, "apply": "1"},
    )
    (error,) = page.context["errors"]
    assert f"group {memory.group} is STABLE on A" in error and "stop them" in error
    for response, doing in ((reset, "its offsets cannot be reset"), (delete, "it cannot be deleted")):
        assert response.status_code == 409, response.content
        detail = response.json()["detail"]
        assert (
            f"group {memory.group} is STABLE on A with 1 member: {doing}" in detail and "stop them" in detail
        )
    refusals = AuditEvent.objects.filter(object_type="consumer_group", outcome="refused")
    assert sorted(refusals.values_list("action", flat=True)) == ["delete", "update", "update"]
    assert all("STABLE" in event.detail for event in refusals) and memory.committed() == COMMITTED
