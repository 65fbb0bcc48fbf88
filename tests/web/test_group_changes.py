"""A consumer group's offset reset by shift, to an offset, to a time and to the end, and its deletion, as
kafka-consumer-groups.sh does them: through the real views and API on the suite's Apache Kafka brokers,
with groups a real consumer committed. Dry run first (current -> new and the lag change, nothing
written), offsets kept within [log start, end], refused while the group has members (409 naming their
count), operator role (a viewer refused and audited), every bad input a 400 naming its field."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from django.urls import reverse

from controlplane.core.models import AuditEvent
from controlplane.flows import cluster_reads
from replication.kafka.clients import make_consumer
from replication.kafka.groups import GroupOffsetsAdmin
from tests.web.mirroring import keyed_around_a_moment, stored_cluster

pytestmark = [pytest.mark.kafka, pytest.mark.django_db]

PARTITIONS = 3
BEFORE, AFTER = 5, 5  # records per partition produced before and after the moment `topic` returns
END = BEFORE + AFTER
COMMITTED = {0: 4, 1: 6, 2: 8}


@pytest.fixture(scope="module")
def topic(cluster_a):
    """(name, moment_ms): 10 records in each of 3 partitions, the first 5 before `moment_ms`, 5 after."""
    name = f"group-changes-{time.time_ns()}"
    return name, keyed_around_a_moment(cluster_a, name, partitions=PARTITIONS, before=BEFORE, after=AFTER)


@pytest.fixture
def group(cluster_a, topic, unique_name):
    """A group a real consumer committed COMMITTED in (it then left: the group is EMPTY)."""
    consumer = make_consumer(cluster_a, group_id=unique_name)
    try:
        consumer.commit(
            offsets=[TopicPartition(topic[0], p, offset) for p, offset in COMMITTED.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()
    return unique_name


@pytest.fixture
def cluster(users, cluster_a):
    cluster_reads.reset_breakers()
    return stored_cluster(actor=users["admin"], config=cluster_a)


def _committed(cluster_a, group) -> dict[int, int]:
    return {p: c.offset for (_, p), c in GroupOffsetsAdmin(cluster_a).committed_offsets(group).items()}


def _reset(client, cluster, group, **body):
    return client.post(
        f"/api/v1/clusters/{cluster.pk}/groups/{group}/reset/", body, content_type="application/json"
    )


def _plan(response) -> list[tuple]:
    assert response.status_code == 200, response.content.decode()
    return [(row["partition"], row["current"], row["new"]) for row in response.json()["partitions"]]


def test_shift_offset_time_and_end_plan_within_the_log_and_the_dry_run_writes_nothing(
    client_as, cluster, group, topic, cluster_a
):
    operator = client_as("operator")
    back = _reset(operator, cluster, group, strategy="shift", shift=-5)
    assert _plan(back) == [(0, 4, 0), (1, 6, 1), (2, 8, 3)]  # partition 0 stops at the log start
    rows = back.json()["partitions"]
    assert [(r["lag_before"], r["lag_after"], r["lag_change"]) for r in rows] == [
        (6, 10, 4),
        (4, 9, 5),
        (2, 7, 5),
    ]
    assert back.json()["lag_change"] == 14 and "before the log start 0" in rows[0]["note"]
    assert _plan(_reset(operator, cluster, group, strategy="shift", shift="3")) == [
        (0, 4, 7),
        (1, 6, 9),
        (2, 8, END),
    ]
    assert _plan(_reset(operator, cluster, group, strategy="offset", offset=7)) == [
        (0, 4, 7),
        (1, 6, 7),
        (2, 8, 7),
    ]
    past = _reset(operator, cluster, group, strategy="offset", offset=10**12, topic=topic[0], partitions=[1])
    assert (
        _plan(past) == [(1, 6, END)]
        and past.json()["partitions"][0]["note"] == f"{10**12} is past the end {END}: the end"
    )
    at_moment = _reset(operator, cluster, group, strategy="timestamp", timestamp=str(topic[1]))
    assert _plan(at_moment) == [(0, 4, BEFORE), (1, 6, BEFORE), (2, 8, BEFORE)]
    assert _plan(_reset(operator, cluster, group, strategy="latest")) == [
        (0, 4, END),
        (1, 6, END),
        (2, 8, END),
    ]
    assert _committed(cluster_a, group) == COMMITTED
    assert not AuditEvent.objects.filter(object_type="consumer_group").exists()  # dry runs are reads


def test_an_applied_shift_writes_only_the_chosen_partitions_and_is_audited(
    client_as, cluster, group, topic, cluster_a
):
    applied = _reset(
        client_as("operator"),
        cluster,
        group,
        strategy="shift",
        shift=-2,
        topic=topic[0],
        partitions=[0, 2],
        dry_run=False,
    )
    assert applied.json()["applied"] and _plan(applied) == [(0, 4, 2), (2, 8, 6)]
    assert _committed(cluster_a, group) == {0: 2, 1: 6, 2: 6}
    event = AuditEvent.objects.get(object_type="consumer_group")
    assert (event.action, event.outcome, event.actor_name) == ("update", "success", "operator")
    assert event.before == {f"{topic[0]}[0]": 4, f"{topic[0]}[2]": 8}
    assert event.after == {f"{topic[0]}[0]": 2, f"{topic[0]}[2]": 6} and "by -2" in event.detail


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


def test_bad_reset_input_names_the_field_in_the_page_and_the_api(client_as, cluster, group, topic, cluster_a):
    operator = client_as("operator")
    url = reverse("web:group-reset", args=["A", group])
    for form, field, words in BAD_RESETS + [
        (
            {"strategy": "offset", "offset": "3", "topic": topic[0], "partitions": "1,7"},
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
        ({"strategy": "offset", "offset": 3, "topic": topic[0], "partitions": [5]}, "partitions"),
    ]
    for body, field in api:
        response = _reset(operator, cluster, group, **body, dry_run=False)
        assert response.status_code == 400 and field in response.json(), (body, response.content)
    assert (
        "3 partitions (0-2): 5 does not exist"
        in _reset(operator, cluster, group, **api[-1][0]).json()["partitions"][0]
    )
    assert _committed(cluster_a, group) == COMMITTED


def test_delete_dry_run_then_delete_is_audited(client_as, cluster, group, topic, cluster_a):
    url = f"/api/v1/clusters/{cluster.pk}/groups/{group}/delete/"
    operator = client_as("operator")
    dry = operator.post(url, {}, content_type="application/json")
    assert dry.status_code == 200 and dry.json()["dry_run"] and not dry.json()["deleted"]
    assert [(p["partition"], p["committed"], p["lag"]) for p in dry.json()["partitions"]] == [
        (0, 4, 6),
        (1, 6, 4),
        (2, 8, 2),
    ]
    assert _committed(cluster_a, group) == COMMITTED

    deleted = operator.post(url, {"dry_run": False}, content_type="application/json")
    assert deleted.status_code == 200 and deleted.json()["deleted"]
    assert group not in GroupOffsetsAdmin(cluster_a).list_groups()
    event = AuditEvent.objects.get(object_type="consumer_group")
    assert (event.action, event.outcome) == ("delete", "success")
    assert event.before == {f"{topic[0]}[{p}]": offset for p, offset in COMMITTED.items()}

    gone = operator.post(url, {"dry_run": False}, content_type="application/json")
    assert gone.status_code == 400 and f"there is no group {group} on A" in gone.json()["group"][0]


def test_a_viewer_is_refused_and_audited_even_for_a_dry_run(client_as, cluster, group, cluster_a):
    viewer = client_as("viewer")
    for path, body in (("reset", {"strategy": "shift", "shift": "not even read"}), ("delete", {})):
        response = viewer.post(
            f"/api/v1/clusters/{cluster.pk}/groups/{group}/{path}/", body, content_type="application/json"
        )
        assert response.status_code == 403 and "operator role" in response.json()["detail"]
    page = viewer.post(reverse("web:group-delete", args=["A", group]), {"apply": "1"})
    assert page.status_code == 403
    refusals = AuditEvent.objects.filter(object_type__in=["consumer_group", "group"], outcome="refused")
    assert refusals.count() == 3 and all(e.actor_name == "viewer" for e in refusals)
    assert _committed(cluster_a, group) == COMMITTED


def test_a_group_with_members_is_refused_with_their_count_and_the_fix(
    client_as, cluster, topic, cluster_a, unique_name
):
    consumer = make_consumer(cluster_a, group_id=unique_name, overrides={"session.timeout.ms": 6000})
    consumer.subscribe([topic[0]])
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the consumer never joined its group"
        operator = client_as("operator")
        reset = _reset(operator, cluster, unique_name, strategy="shift", shift=-1, dry_run=False)
        delete = operator.post(
            f"/api/v1/clusters/{cluster.pk}/groups/{unique_name}/delete/",
            {"dry_run": False},
            content_type="application/json",
        )
    finally:
        consumer.close()
    for response, doing in ((reset, "its offsets cannot be reset"), (delete, "it cannot be deleted")):
        assert response.status_code == 409, response.content
        detail = response.json()["detail"]
        assert (
            f"group {unique_name} is STABLE on A with 1 member: {doing}" in detail and "stop them" in detail
        )
    assert set(AuditEvent.objects.filter(object_type="consumer_group").values_list("action", "outcome")) == {
        ("update", "refused"),
        ("delete", "refused"),
    }
