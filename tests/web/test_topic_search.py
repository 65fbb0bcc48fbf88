"""The message browser's search across partitions, through the real page and API: key, value, JSON path,
header and time range; the records-read bound and the count read shown; every bad input a 400 naming its
field; hostile records (binary, huge, not UTF-8, bad or deeply nested JSON, tombstones) never a 500; a
viewer cannot search a masked topic's values. Rules, on the in-memory cluster (`memory_clusters`); the
hostile records also on the suite's Apache Kafka brokers, through the Kafka consumer's fetch limits."""

from __future__ import annotations

import base64
import csv
import io
import json
import time

import pytest
from django.urls import reverse

from controlplane.browse import record_search
from controlplane.flows import cluster_reads
from replication.kafka.clients import make_producer
from tests.web.mirroring import (
    MEMORY_A,
    append_keyed,
    keyed_around_a_moment,
    memory_keyed_around_a_moment,
    stored_cluster,
)

pytestmark = pytest.mark.django_db

EPOCH = "1970-01-01T00:00:00Z"
PARTITIONS, BEFORE, AFTER = 3, 6, 4  # keyed records per partition before and after the moment
HOSTILE = [
    b"\xff\xfe\x00\x01binary",
    b"caf\xe9 latin-1, not UTF-8",
    b'{"order": 1, "amount":',
    b"[" * 50_000 + b"]" * 50_000,
    b'{"order": 99, "pad": "' + b"x" * 600_000 + b'"}',
    None,
]
HOSTILE_KEY, HOSTILE_HEADERS = b"\x00\xffkey", [("bin", b"\xff"), ("none", None)]


@pytest.fixture
def memory_a(memory_clusters):
    return memory_clusters.cluster(MEMORY_A.bootstrap_servers)


@pytest.fixture
def topic(memory_a):
    """(name, moment_ms): per partition keyed JSON records k0..k5, the moment, then k6..k9; partition 2
    then holds the hostile records."""
    name = f"search-orders-{time.time_ns()}"
    moment_ms = memory_keyed_around_a_moment(
        memory_a, name, partitions=PARTITIONS, before=BEFORE, after=AFTER
    )
    for value in HOSTILE:
        memory_a.append(name, 2, key=HOSTILE_KEY, value=value, headers=HOSTILE_HEADERS, timestamp_ms=0)
    return name, moment_ms


@pytest.fixture
def cluster(users, memory_clusters):
    return stored_cluster(actor=users["admin"], config=MEMORY_A)


@pytest.fixture(scope="module")
def kafka_topic(cluster_a):
    """`topic` on the suite's cluster A."""
    name = f"search-orders-{time.time_ns()}"
    moment_ms = keyed_around_a_moment(cluster_a, name, partitions=PARTITIONS, before=BEFORE, after=AFTER)
    producer = make_producer(cluster_a, overrides={"linger.ms": 0, "message.max.bytes": 2_000_000})
    for value in HOSTILE:
        producer.produce(name, key=HOSTILE_KEY, value=value, headers=HOSTILE_HEADERS, partition=2)
    assert producer.flush(30) == 0
    return name, moment_ms


@pytest.fixture
def kafka_cluster(users, cluster_a):
    cluster_reads.reset_breakers()
    return stored_cluster(actor=users["admin"], config=cluster_a)


def _search(client, cluster, topic, **params):
    return client.get(f"/api/v1/clusters/{cluster.pk}/topics/{topic}/search/", params)


def _found(response) -> list[tuple[int, str]]:
    assert response.status_code == 200, response.content.decode()[:2000]
    return [(r["partition"], r["key"]["text"]) for r in response.json()["records"]]


def test_every_filter_finds_its_records_in_every_partition(client_as, cluster, topic):
    name, moment_ms = topic
    viewer = client_as("viewer")
    everywhere = [(p, "k3") for p in range(PARTITIONS)]
    assert sorted(_found(_search(viewer, cluster, name, key="k3"))) == everywhere
    assert sorted(_found(_search(viewer, cluster, name, value='"amount": 30'))) == everywhere
    assert sorted(_found(_search(viewer, cluster, name, json_path="$.order", json_value="3"))) == everywhere
    assert sorted(_found(_search(viewer, cluster, name, header="trace=t-3"))) == everywhere
    assert (
        _found(_search(viewer, cluster, name, json_path="$.order", json_value='"3"')) == []
    )  # JSON equality
    both = _search(viewer, cluster, name, key="k", header="trace=t-7", json_path="amount", json_value="70")
    assert sorted(_found(both)) == [(p, "k7") for p in range(PARTITIONS)]

    after = _search(viewer, cluster, name, header="trace", since=str(moment_ms))
    assert sorted(_found(after)) == sorted(
        (p, f"k{i}") for p in range(PARTITIONS) for i in range(BEFORE, BEFORE + AFTER)
    )
    before = _search(viewer, cluster, name, key="k", until=str(moment_ms), max_records=100)
    assert len(_found(before)) == PARTITIONS * BEFORE
    body = before.json()
    assert body["scanned"] == PARTITIONS * BEFORE and body["complete"]
    assert [(p["start"], p["stop"], p["complete"]) for p in body["partitions"]] == [
        (0, BEFORE, True)
    ] * PARTITIONS


def test_the_records_read_are_bounded_counted_and_said(client_as, cluster, topic, settings):
    name, _ = topic
    settings.MIRRORPLANE_BROWSE_MAX_SCANNED = 6
    body = _search(client_as("viewer"), cluster, name, key="k").json()
    assert body["scanned"] == 6 and body["search"]["max_scanned"] == 6
    assert [p["scanned"] for p in body["partitions"]] == [2, 2, 2]
    assert any("only the newest records" in note for note in body["notes"])
    from_start = _search(client_as("viewer"), cluster, name, key="k", since=EPOCH).json()
    assert [(p["start"], p["scanned"], p["complete"]) for p in from_start["partitions"]] == [
        (0, 2, False)
    ] * 3
    assert not from_start["complete"] and any("stopped at a bound" in note for note in from_start["notes"])
    refused = _search(client_as("viewer"), cluster, name, key="k", max_scanned=7)
    assert refused.status_code == 400 and "give a number from 1 to 6" in refused.json()["max_scanned"][0]

    capped = _search(client_as("viewer"), cluster, name, key="k", max_records=2).json()
    assert len(capped["records"]) == 2 and capped["more"] and not capped["complete"]

    page = client_as("viewer").get(reverse("web:topic-search", args=["A", name]), {"key": "k3"})
    assert page.status_code == 200
    html = page.content.decode()
    assert '<strong id="search-scanned">6</strong> records read' in html and "Read from A at" in html


BAD = [
    ({"header": "=t-1"}, "header"),
    ({"json_path": "$.a[x]"}, "json_path"),
    ({"json_value": "7"}, "json_value"),
    ({"since": "last tuesday"}, "since"),
    ({"until": "-5"}, "until"),
    ({"since": "2026-11-24T06:00:00Z", "until": "2026-11-24T05:00:00Z"}, "until"),
    ({"max_scanned": "0"}, "max_scanned"),
    ({"max_records": "many"}, "max_records"),
    ({"format": "yaml"}, "format"),
]


def test_bad_search_input_is_a_400_naming_the_field(client_as, cluster, topic):
    viewer = client_as("viewer")
    for params, field in BAD:
        response = _search(viewer, cluster, topic[0], **params)
        assert response.status_code == 400 and list(response.json()) == [field], (params, response.content)
        page = viewer.get(reverse("web:topic-search", args=["A", topic[0]]), params)
        assert page.status_code == 400 and any(e.startswith(f"{field}: ") for e in page.context["errors"])
    unknown = _search(viewer, cluster, f"nope-{topic[0]}", key="k")
    assert unknown.status_code == 400 and "topic" in unknown.json()


@pytest.mark.parametrize(
    "on", [pytest.param("kafka", marks=pytest.mark.kafka), "memory"], ids=["kafka", "memory"]
)
def test_hostile_records_are_searched_and_shown_never_a_500(client_as, on, request):
    cluster, topic = (
        (request.getfixturevalue("kafka_cluster"), request.getfixturevalue("kafka_topic"))
        if on == "kafka"
        else (request.getfixturevalue("cluster"), request.getfixturevalue("topic"))
    )
    viewer = client_as("viewer")
    name = topic[0]
    for params in (
        {"value": "binary"},
        {"value": "x", "format": "json"},
        {"json_path": "$.order"},
        {"header": "bin"},
        {"header": "none", "format": "hex"},
        {"key": "\x00"},
        {"value": "\ufffd"},
    ):
        response = _search(viewer, cluster, name, **params, since=EPOCH)
        assert response.status_code == 200, (params, response.content[:500])
    hits = _search(viewer, cluster, name, header="bin", since=EPOCH).json()["records"]
    assert len(hits) == len(HOSTILE)
    assert _found(_search(viewer, cluster, name, value="binary", since=EPOCH)) == [(2, "00 ff 6b 65 79")]
    by_path = _search(viewer, cluster, name, json_path="$.order", json_value="99", since=EPOCH).json()[
        "records"
    ]
    assert [r["value"]["size"] for r in by_path] == [len(HOSTILE[4])]  # 600 KB of JSON, shown cut
    page = viewer.get(
        reverse("web:topic-search", args=["A", name]), {"header": "bin", "since": EPOCH, "format": "json"}
    )
    assert page.status_code == 200
    assert page.content.decode().count('<tr data-partition="2"') == len(HOSTILE)


def test_a_viewer_cannot_search_the_values_of_a_masked_topic(client_as, cluster, topic, settings):
    name = topic[0]
    settings.MIRRORPLANE_BROWSE_MASKED_TOPICS = [name]
    refused = _search(client_as("viewer"), cluster, name, value="amount")
    assert refused.status_code == 400 and "masked for your role" in refused.json()["value"][0]
    by_key = _search(client_as("viewer"), cluster, name, key="k3").json()
    assert by_key["masked"] and by_key["records"][0]["value"]["masked"]
    assert len(_found(_search(client_as("operator"), cluster, name, value='"amount": 30'))) == PARTITIONS


def test_the_result_exports_whole_records_as_json_and_csv(client_as, cluster, topic, settings):
    name = topic[0]
    url = reverse("web:topic-search", args=["A", name])
    operator = client_as("operator")
    page = operator.get(url, {"header": "bin", "since": EPOCH})
    assert 'id="export-json"' in page.content.decode()

    exported = operator.get(url, {"header": "bin", "since": EPOCH, "export": "json"})
    assert exported.status_code == 200 and exported["Content-Disposition"].startswith(
        'attachment; filename="A-'
    )
    body = json.loads(exported.content)
    assert body["scanned"] > 0 and body["read_at"] and len(body["records"]) == len(HOSTILE)
    values = [r["value"] for r in body["records"]]
    assert values[0] == {"base64": base64.b64encode(HOSTILE[0]).decode()}
    assert values[4] == {"text": HOSTILE[4].decode()}  # whole: 600 KB, not the page's 4096 bytes
    assert values[5] is None and body["records"][0]["key"] == {
        "base64": base64.b64encode(b"\x00\xffkey").decode()
    }

    as_csv = operator.get(url, {"key": "k3", "export": "csv"})
    assert as_csv["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(as_csv.content.decode())))
    assert rows[0] == ["partition", "offset", "timestamp_ms", "key", "value", "headers"]
    assert sorted((row[0], row[3]) for row in rows[1:]) == [(str(p), "k3") for p in range(PARTITIONS)]
    assert json.loads(rows[1][5]) == [{"name": "trace", "value": {"text": "t-3"}}]

    bad = operator.get(url, {"key": "k3", "export": "xlsx"})
    assert bad.status_code == 400 and any(e.startswith("export: ") for e in bad.context["errors"])
    settings.MIRRORPLANE_BROWSE_MASKED_TOPICS = [name]
    masked = json.loads(client_as("viewer").get(url, {"key": "k3", "export": "json"}).content)
    k3_value = b'{"order": 3, "amount": 30}'
    assert {r["value"]["masked"] for r in masked["records"]} == {f"masked ({len(k3_value)} bytes)"}


def test_a_csv_cell_never_starts_a_formula(client_as, cluster, memory_a, unique_name):
    memory_a.create(unique_name, 1)
    memory_a.append(unique_name, 0, key=b'=HYPERLINK("http://x")', value=b"@SUM(A1)")
    exported = client_as("viewer").get(
        reverse("web:topic-search", args=["A", unique_name]), {"export": "csv", "search": "1"}
    )
    (row,) = list(csv.reader(io.StringIO(exported.content.decode())))[1:]
    assert (row[3], row[4]) == ('\'=HYPERLINK("http://x")', "'@SUM(A1)")


def test_a_live_tail_shows_what_came_after_its_positions_newest_first(
    client_as, cluster, memory_a, unique_name, settings
):
    memory_a.create(unique_name, 2)
    append_keyed(memory_a, unique_name, count=3, partition=0)
    viewer = client_as("viewer")
    url = f"/api/v1/clusters/{cluster.pk}/topics/{unique_name}/tail/"
    first = viewer.get(url, {"header": "trace"}).json()
    assert first["records"] == [] and first["scanned"] == 0 and first["positions"] == "0:3,1:0"

    append_keyed(memory_a, unique_name, count=2, partition=1, first=10)
    append_keyed(memory_a, unique_name, count=2, partition=0, first=20)
    nxt = viewer.get(url, {"key": "k2", "positions": first["positions"]}).json()
    assert [(r["partition"], r["key"]["text"]) for r in nxt["records"]] == [
        (0, "k21"),
        (0, "k20"),
    ]  # newest first
    assert nxt["scanned"] == 4 and nxt["positions"] == "0:5,1:2"
    again = viewer.get(url, {"key": "k2", "positions": nxt["positions"]}).json()
    assert again["records"] == [] and again["scanned"] == 0 and again["positions"] == nxt["positions"]

    settings.MIRRORPLANE_BROWSE_MAX_SCANNED = 2  # one record a partition a read
    append_keyed(memory_a, unique_name, count=3, partition=0, first=30)
    behind = viewer.get(url, {"positions": again["positions"]}).json()
    assert [r["key"]["text"] for r in behind["records"]] == ["k32"] and behind["positions"] == "0:8,1:2"
    assert behind["partitions"][0]["skipped"] == 2 and "2 records came faster" in behind["notes"][0]

    for bad in ("0=3", "0:x", "-1:4"):
        refused = viewer.get(url, {"positions": bad})
        assert refused.status_code == 400 and list(refused.json()) == ["positions"], bad
    fragment = viewer.get(
        reverse("web:topic-tail", args=["A", unique_name]), {"positions": "0:7", "key": "k3"}
    )
    html = fragment.content.decode()
    assert (
        fragment.status_code == 200
        and 'data-offset="7"' in html
        and 'value="0:8,1:2" hx-swap-oob="true"' in html
    )
    stopped = viewer.get(reverse("web:topic-tail", args=["A", unique_name]), {"positions": "nope"})
    assert stopped.status_code == 286 and "The tail stopped: positions:" in stopped.content.decode()


def test_matches_past_their_memory_bound_are_counted_not_kept(client_as, cluster, topic, monkeypatch):
    monkeypatch.setattr(record_search, "MATCHED_BYTES_MAX", 50_000)
    body = _search(client_as("viewer"), cluster, topic[0], header="bin", since=EPOCH).json()
    assert len(body["records"]) == len(HOSTILE) - 2  # the 100 KB and 600 KB values are not held
    assert (
        body["more"]
        and not body["complete"]
        and body["notes"][0].startswith("2 more matching record(s) not kept")
    )
