"""Issue 27 (security), items 4, 7, 8: what a producer can write and what a client can send, through the
real web server (gunicorn as the Dockerfile runs it, DEBUG off): every page renders, every bad input is a
4xx naming the field and the fix, stored state unchanged, never a 500."""

from __future__ import annotations

import json

import pytest

from controlplane.alerts.models import AlertSilence, NotificationChannel
from controlplane.flows import services
from controlplane.flows.models import Cluster, Flow
from controlplane.operations.models import Operation
from controlplane.status.models import FlowRpoBudget
from harness.runtime import create_topic
from replication.config import ClusterConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from tests.web.served import api, signed_in


def stored_state() -> list:
    """Every row a bad input could have written (refusals are audited: the audit log is not compared)."""
    models = (Cluster, Flow, FlowRpoBudget, NotificationChannel, AlertSilence, Operation)
    return [sorted(map(str, model.objects.values_list())) for model in models]


# -- item 4: any value a producer can write renders --------------------------------------------------------
@pytest.mark.kafka
def test_record_timestamps_past_year_9999_and_deep_json_values_render(
    web, admin, cluster_a: ClusterConfig, unique_name
):
    from replication.kafka.clients import make_producer

    # Apache Kafka 4 refuses timestamps over an hour ahead unless the topic allows them; other brokers don't.
    errors = TopicAdmin(cluster_a).create_topics(
        [NewRemoteTopic(unique_name, unique_name, 1, 1, {"message.timestamp.after.max.ms": str(2**63 - 1)})]
    )
    assert errors.get(unique_name) is None, errors
    odd_timestamps = [253402300800000, 2**63 - 1, 1000, 1]  # year 10000, the largest a producer can send
    producer, failures = make_producer(cluster_a), []

    def delivered(error, message) -> None:
        failures.extend([error] if error else [])

    for timestamp in odd_timestamps:
        producer.produce(unique_name, value=b"v", partition=0, timestamp=timestamp, on_delivery=delivered)
        producer.flush(30)
    deep = b"[" * 4000 + b"]" * 4000  # deeper than Python's json parser recurses
    producer.produce(unique_name, value=deep, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and failures == []
    services.cluster_create(actor=admin[0], alias="A", bootstrap_servers=cluster_a.bootstrap_servers)
    cluster = Cluster.objects.get(alias="A")

    page = signed_in(web, "boss").get(f"{web.url}/topics/A/{unique_name}/?offset=0", timeout=30)
    assert page.status_code == 200, page.text[:300]
    assert "253402300800000 ms since the epoch (outside years 1-9999)" in page.text
    assert "1970-01-01 00:00:01 UTC" in page.text
    shown = api(web, admin[1]).get(
        f"{web.url}/api/v1/clusters/{cluster.pk}/topics/{unique_name}/records/?offset=0&format=json",
        timeout=30,
    )
    assert shown.status_code == 200, shown.text[:300]
    records = shown.json()["records"]
    assert [r["timestamp_ms"] for r in records[:4]] == odd_timestamps
    assert [r["timestamp"] is None for r in records[:4]] == [True, True, False, False]
    assert records[4]["value"]["format"] == "text" and records[4]["value"]["note"]


# -- item 7: loop detection in linear time -----------------------------------------------------------------
def test_mm2_import_dry_run_of_a_full_mesh_answers_in_seconds(web, admin):
    aliases = [f"c{index}" for index in range(11)]
    lines = ["clusters = " + ", ".join(aliases)]
    lines += [f"{alias}.bootstrap.servers = {alias}.invalid:9092" for alias in aliases]
    lines += [f"{s}->{t}.enabled = true" for s in aliases for t in aliases if s != t]
    before = stored_state()
    answer = api(web, admin[1]).post(
        f"{web.url}/api/v1/mm2/import/", json={"text": "\n".join(lines), "dry_run": True}, timeout=25
    )
    assert answer.status_code == 200, answer.text[:500]
    assert len([c for c in answer.json()["changes"] if c["object_type"] == "flow"]) == 110
    assert stored_state() == before


@pytest.mark.parametrize("timestamp_ms", [-(2**63), -62135596800001, -5, 253402300800000, 2**63 - 1])
def test_record_timestamps_outside_the_calendar_render_as_milliseconds(timestamp_ms):
    from controlplane.browse.records import shown
    from controlplane.web.templatetags.web import record_time
    from replication.browse import KafkaRecord, ValueFormat

    record = shown(
        KafkaRecord(topic="t", partition=0, offset=0, timestamp_ms=timestamp_ms, key=None, value=b"v"),
        fmt=ValueFormat.AUTO,
        masked=False,
    )
    assert record.to_dict()["timestamp_ms"] == timestamp_ms
    assert str(timestamp_ms) in record_time(record) or record.timestamp is not None


# -- item 6: patterns match in linear time, and what RE2 cannot run is refused at input ---------------------
@pytest.mark.kafka
def test_backtracking_patterns_match_topic_names_in_linear_time(
    web, admin, cluster_a, cluster_b, unique_name
):
    """`(a+)+b` against a 29-character name took 24-27 s on Python's backtracking re (gunicorn kills at 30)."""
    hostile = f"{unique_name}-" + "a" * 40 + "-"
    create_topic(cluster_a, hostile, 1)
    services.cluster_create(actor=admin[0], alias="A", bootstrap_servers=cluster_a.bootstrap_servers)
    services.cluster_create(actor=admin[0], alias="B", bootstrap_servers=cluster_b.bootstrap_servers)
    client = api(web, admin[1])
    created = client.post(
        f"{web.url}/api/v1/flows/",
        json={"source": "A", "target": "B", "topics": [r".*(a+)+b", r"(.*a){12}x"], "enabled": False},
        timeout=25,
    )
    assert created.status_code == 201, created.text[:500]
    page = signed_in(web, "boss").get(f"{web.url}/topics/?cluster=A&q={unique_name}", timeout=25)
    assert page.status_code == 200 and hostile in page.text


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (r"(?<r>[a-z]+)-\k<r>", "back-references"),
        (r"(a)\1", "back-references"),
        (r"(?!internal).*", "lookahead and lookbehind"),
        (r"(?<=a)b", "lookahead and lookbehind"),
        (r"a*+b", "possessive"),
        (r"(?>a|ab)c", "atomic group"),
        (r"orders$\r", "followed by more pattern"),
    ],
)
def test_patterns_the_linear_time_matcher_cannot_run_are_refused_naming_the_field(web, admin, pattern, said):
    services.cluster_create(actor=admin[0], alias="A", bootstrap_servers="a.invalid:9092")
    services.cluster_create(actor=admin[0], alias="B", bootstrap_servers="b.invalid:9092")
    before = stored_state()
    client = api(web, admin[1])
    for field in ("topics", "groups_exclude"):
        answer = client.post(
            f"{web.url}/api/v1/flows/", json={"source": "A", "target": "B", field: [pattern]}, timeout=25
        )
        assert answer.status_code == 400, answer.text[:500]
        [message] = answer.json()[field]
        assert said in message and "RE2" in message, message
        assert stored_state() == before
    escaped = pattern.replace("\\", "\\\\")  # a backslash in a .properties file is written twice
    text = f"clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.topics = {escaped}\n"
    imported = client.post(f"{web.url}/api/v1/mm2/import/", json={"text": text, "dry_run": True}, timeout=25)
    assert imported.status_code == 400 and said in imported.text, imported.text[:500]
    assert stored_state() == before


# -- item 8: every input gets a 4xx naming the field, never a 500 --------------------------------------------
DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def flow_ab(admin):
    a = services.cluster_create(actor=admin[0], alias="A", bootstrap_servers="a.invalid:9092")
    b = services.cluster_create(actor=admin[0], alias="B", bootstrap_servers="b.invalid:9092")
    return services.flow_create(actor=admin[0], source=a, target=b, enabled=False)


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        (
            "post",
            "offsets/translate/",
            {"offsets": [{"topic": "t", "partition": 0, "offset": 2**63}]},
            "offset",
        ),
        (
            "post",
            "offsets/translate/",
            {"offsets": [{"topic": "t", "partition": 2**40, "offset": 0}]},
            "partition",
        ),
        ("put", "rpo-budget/", {"seconds_behind": 60, "records_behind": 2**70}, "records_behind"),
        ("put", "rpo-budget/", {"seconds_behind": "1e400"}, "seconds_behind"),
        ("put", "rpo-budget/", '{"seconds_behind": 1e400}', "seconds_behind"),
        ("put", "rpo-budget/", {"seconds_behind": 2**70}, "seconds_behind"),
        ("patch", "", {"offset_lag_max": 2**40}, "offset_lag_max"),
        ("patch", "", {"tasks_max": -(2**63) - 1}, "tasks_max"),
        (
            "post",
            "failover/",
            {"groups": ["g"], "confirm": "A->B", "drain_timeout_s": "nan"},
            "drain_timeout_s",
        ),
        ("post", "failover/", {"groups": ["g"], "confirm": "A->B", "timeout_s": "nan"}, "timeout_s"),
        ("post", "mm2-takeover/", {"from_dry_run": 2**64}, "from_dry_run"),
        (
            "post",
            "/api/v1/notification-channels/",
            {"name": "n", "kind": "webhook", "url": "http://h:99999/"},
            "url",
        ),
        (
            "post",
            "/api/v1/notification-channels/",
            {"name": "n", "kind": "webhook", "url": "http://[::1/x"},
            "url",
        ),
        ("post", "/api/v1/alerts/silences/", {"duration_s": 1e300}, "duration_s"),
        ("post", "/api/v1/flows/", DEEP_JSON, "detail"),
        ("post", "/api/v1/mm2/import/", DEEP_JSON, "detail"),
        ("put", "rpo-budget/", "[" * 65 + "]" * 65, "nested deeper than 64"),
    ],
    ids=lambda value: value[:30] if isinstance(value, str) else None,
)
def test_api_inputs_out_of_bounds_are_a_4xx_naming_the_field(web, admin, flow_ab, method, path, body, field):
    url = f"{web.url}{path}" if path.startswith("/") else f"{web.url}/api/v1/flows/{flow_ab.pk}/{path}"
    data = body if isinstance(body, str) else json.dumps(body)
    before = stored_state()
    answer = api(web, admin[1]).request(
        method, url, data=data, headers={"Content-Type": "application/json"}, timeout=25
    )
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])
    assert f'"{field}"' in answer.text or field in answer.json().get("detail", ""), answer.text[:300]
    assert stored_state() == before


@pytest.mark.parametrize(
    ("path", "status", "said"),
    [
        ("/flows/99999999999999999999/", 404, ""),
        ("/flows/99999999999999999999/failover/", 404, ""),
        ("/topics/A/orders/?offset=1e20", 400, "offset"),
        (f"/topics/A/orders/?offset={2**63}", 400, "offset"),
        (f"/topics/A/orders/?partition={2**64}", 400, "partition"),
        ("/topics/A/orders/?time=99999-01-01T00:00:00", 400, "time"),
        ("/topics/A/a/b/", 400, "not a Kafka topic name"),
    ],
)
def test_web_inputs_out_of_bounds_are_a_4xx(web, admin, flow_ab, path, status, said):
    answer = signed_in(web, "boss").get(f"{web.url}{path}", timeout=25)
    assert answer.status_code == status, (answer.status_code, answer.text[:300])
    assert said in answer.text


def test_web_operation_and_budget_forms_refuse_numbers_past_their_bounds(web, admin, flow_ab):
    session = signed_in(web, "boss")
    before = stored_state()
    for path, data in (
        (f"/flows/{flow_ab.pk}/drills/", {"drill_groups": "g", "record_wait_s": "1e400"}),
        (f"/flows/{flow_ab.pk}/cutover/", {"confirm": "A->B", "fence_s": "nan"}),
    ):
        answer = session.post(
            f"{web.url}{path}",
            data={**data, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
            headers={"Referer": f"{web.url}/"},
            timeout=25,
        )
        assert answer.status_code < 500 and "is not a number of seconds" in answer.text, answer.text[:300]
    assert stored_state() == before
