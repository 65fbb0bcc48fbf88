"""The topic and message browser through the real views: records from an offset and a moment, a mirrored
record beside its copy, masking for viewers, clear errors for bad input and for a cluster that does not
answer. The rules on the in-memory clusters (`memory_clusters`, mirrored by the engine's task on them);
a copy found on Apache Kafka by a real mirror's offset syncs, a cluster that refuses connections and a
broker whose end offsets lag what it holds, on the suite's brokers."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.urls import reverse

from controlplane.browse.records import record_copies, topic_records
from controlplane.browse.seek import Seek
from controlplane.flows import cluster_reads, engine, services
from replication.config import ClusterConfig
from replication.formats import OffsetSync
from replication.kafka.clients import make_producer
from replication.kafka.embedded import embedded_clusters
from replication.policy import PROVENANCE_HEADER, replication_policy_for
from tests.web.mirroring import (
    MEMORY_A,
    MEMORY_B,
    append_keyed,
    create_topic,
    keyed_record,
    mirror_in_memory,
    mirror_topic,
    mirrored_flow,
    produce_keyed,
    stored_cluster,
)

pytestmark = pytest.mark.django_db

RECORDS = 12


@pytest.fixture
def memory_ab(memory_clusters):
    """The in-memory clusters A and B."""
    return tuple(memory_clusters.cluster(c.bootstrap_servers) for c in (MEMORY_A, MEMORY_B))


@pytest.fixture
def mirrored(memory_ab):
    """A topic of A with RECORDS keyed JSON records on partition 0, mirrored to B (A.<topic>) by the
    engine's task on the in-memory clusters."""
    a, b = memory_ab
    topic = "browse-orders"
    a.create(topic, 2)
    append_keyed(a, topic, count=RECORDS)
    return topic, mirror_in_memory(a, b, topic, partitions=2, records=RECORDS)


@pytest.fixture
def flow(users, mirrored):
    admin = users["admin"]
    a = stored_cluster(actor=admin, config=MEMORY_A)
    b = stored_cluster(actor=admin, config=MEMORY_B)
    return mirrored_flow(actor=admin, source=a, target=b, topic=mirrored[0])


@pytest.fixture(scope="module")
def kafka_mirrored(cluster_a, cluster_b):
    """`mirrored` on the suite's Apache Kafka clusters, by the engine's task on Kafka."""
    topic = "browse-orders"
    create_topic(cluster_a, topic, 2)
    produce_keyed(cluster_a, topic, count=RECORDS)
    remote_topic = mirror_topic(cluster_a, cluster_b, topic, partitions=2, records=RECORDS)
    return topic, remote_topic


@pytest.fixture
def kafka_flow(users, cluster_a, cluster_b, kafka_mirrored):
    cluster_reads.reset_breakers()
    admin = users["admin"]
    a = stored_cluster(actor=admin, config=cluster_a)
    b = stored_cluster(actor=admin, config=cluster_b)
    return mirrored_flow(actor=admin, source=a, target=b, topic=kafka_mirrored[0])


def test_viewer_reads_records_from_an_offset(client_as, flow, mirrored):
    topic, remote_topic = mirrored
    response = client_as("viewer").get(
        reverse("web:topic", args=["A", topic]), {"offset": 3, "max_records": 4}
    )
    assert response.status_code == 200, response.content.decode()
    page = response.context["page"]
    assert [r.offset for r in page.records] == [3, 4, 5, 6]
    assert page.previous_offset == 0
    first = page.records[0]
    assert (first.key.text, first.value.format) == ("k3", "json")
    assert '"amount": 30' in first.value.text
    assert [(name, value.text) for name, value in first.headers] == [("trace", "t-3")]
    assert [(m.role, m.remote_topic) for m in page.mirrors] == [("source", remote_topic)]
    body = response.content.decode()
    assert "Read from A at" in body and "compare these records with their copies" in body
    listing = client_as("viewer").get(reverse("web:topics"), {"cluster": "A", "q": topic})
    assert listing.status_code == 200 and f"A.{topic}" in listing.content.decode()  # its mirror, by A->B

    as_hex = client_as("viewer").get(
        reverse("web:topic", args=["A", topic]), {"offset": 3, "max_records": 1, "format": "hex"}
    )
    assert as_hex.context["page"].records[0].key.text == "6b 33"  # "k3"


def test_seek_by_time_starts_at_the_first_record_at_or_after_it(client_as, flow, mirrored):
    topic, _ = mirrored
    viewer = client_as("viewer")
    sixth = viewer.get(reverse("web:topic", args=["A", topic]), {"offset": 5, "max_records": 1})
    moment = sixth.context["page"].records[0].timestamp
    response = viewer.get(
        reverse("web:topic", args=["A", topic]), {"time": moment.isoformat(), "max_records": 2}
    )
    assert response.status_code == 200
    records = response.context["page"].records
    assert records and records[0].timestamp >= moment and records[0].offset <= 5


@pytest.mark.parametrize("on", [pytest.param("kafka", marks=pytest.mark.kafka), "memory"])
def test_records_beside_their_copies(client_as, on, request):
    """On Apache Kafka too: the copies a real mirror wrote, found by its offset syncs on the brokers."""
    flow = request.getfixturevalue("kafka_flow" if on == "kafka" else "flow")
    topic, remote_topic = request.getfixturevalue("kafka_mirrored" if on == "kafka" else "mirrored")
    response = client_as("viewer").get(
        reverse("web:record-copies", args=[flow.pk]), {"topic": topic, "offset": 2, "max_records": 5}
    )
    assert response.status_code == 200, response.content.decode()
    page = response.context["page"]
    assert page.remote_topic == remote_topic
    assert [(c.source.offset, c.state.value) for c in page.copies] == [(o, "equal") for o in range(2, 7)]
    assert all(c.copy.key.text == c.source.key.text for c in page.copies)


def test_the_newest_records_past_the_last_offset_sync_show_beside_their_copies_as_equal(
    client_as, flow, mirrored, memory_ab
):
    """Issue 28: the default view (the newest records) said "not replicated yet" for every record past the
    last offset sync while the flow was 0 behind, and "headers differ" for every record the mirror had
    stamped with its provenance header. Partition 1: five records copied with the provenance header, one
    offset sync (at the first record, as MM2 emits it)."""
    topic, remote_topic = mirrored
    a, b = memory_ab
    append_keyed(a, topic, count=5, partition=1)
    viewer = client_as("viewer")
    source = viewer.get(
        f"/api/v1/clusters/{flow.source_id}/topics/{topic}/records/", {"partition": 1, "offset": 0}
    ).json()["records"]
    for index, record in enumerate(source):  # the copies a mirror writes: same record, its header added
        key, value, headers = keyed_record(index)
        b.append(
            remote_topic,
            1,
            key=key,
            value=value,
            headers=[*headers, (PROVENANCE_HEADER, b"A")],
            timestamp_ms=record["timestamp_ms"],
        )
    sync = OffsetSync(topic, 1, 0, 0)
    config = engine.flow_to_config(flow)
    policy = replication_policy_for(config, known_aliases=["A", "B"])
    a.append(policy.flow_offset_syncs_topic(config), 0, key=sync.key(), value=sync.value())

    body = (
        client_as("viewer").get(f"/api/v1/flows/{flow.pk}/copies/", {"topic": topic, "partition": 1}).json()
    )
    assert [(c["source"]["offset"], c["state"], c["located_by"]) for c in body["copies"]] == [
        (0, "equal", "offset_sync"),  # the provenance header is Mirrorplane's, not the record's
        *[(offset, "equal", "content") for offset in range(1, 5)],  # past the sync: found reading forward
    ], body
    page = client_as("viewer").get(
        reverse("web:record-copies", args=[flow.pk]), {"topic": topic, "partition": 1}
    )
    html = page.content.decode()
    assert "5 equal" in html and "not replicated yet" not in html and "after the last sync" in html


def test_masked_topics_hide_values_from_viewers_only(client_as, flow, mirrored, settings):
    topic, _ = mirrored
    settings.MIRRORPLANE_BROWSE_MASKED_TOPICS = ["browse-.*"]
    url, query = reverse("web:topic", args=["A", topic]), {"offset": 0, "max_records": 1}
    viewer = client_as("viewer").get(url, query)
    record = viewer.context["page"].records[0]
    assert record.value.masked and record.value.text.startswith("masked (")
    assert record.headers[0][1].masked and record.key.text == "k0"
    assert '"order"' not in viewer.content.decode()
    operator = client_as("operator").get(url, query).context["page"].records[0]
    assert not operator.value.masked and '"order": 0' in operator.value.text
    copies = client_as("viewer").get(
        reverse("web:record-copies", args=[flow.pk]), {"topic": topic, "offset": 0, "max_records": 1}
    )
    assert copies.context["page"].copies[0].copy.value.masked
    assert copies.context["page"].copies[0].state.value == "equal"


BAD_QUERIES = [
    ({"offset": "abc"}, "offset", "'abc' is not a whole number"),
    ({"offset": "-4"}, "offset", "out of range"),
    ({"time": "yesterday noon"}, "time", "is not a time: give ISO 8601"),
    ({"offset": "1", "time": "2026-11-24T05:00:00Z"}, "time", "not both"),
    ({"max_records": "100000"}, "max_records", "from 1 to 500"),
    ({"format": "xml"}, "format", "use one of auto, text, json, hex"),
    ({"partition": "7"}, "partition", "partitions 0 to 1"),
]


def test_bad_input_names_the_field(client_as, flow, mirrored):
    viewer = client_as("viewer")
    for query, field, words in BAD_QUERIES:
        response = viewer.get(reverse("web:topic", args=["A", mirrored[0]]), query)
        assert response.status_code == 400, query
        errors = response.context["errors"]
        assert any(e.startswith(f"{field}: ") and words in e for e in errors), (query, errors)


def test_unknown_topic_is_a_clear_error(client_as, flow):
    response = client_as("viewer").get(reverse("web:topic", args=["A", "no-such-topic"]))
    assert response.status_code == 400
    assert response.context["errors"] == [
        "topic: cluster A has no topic 'no-such-topic': check the name on the topics page"
    ]
    not_mirrored = client_as("viewer").get(reverse("web:record-copies", args=[flow.pk]), {"topic": "other"})
    assert "does not replicate topic 'other'" in not_mirrored.context["errors"][0]


@pytest.mark.kafka
def test_an_unreachable_cluster_answers_502_then_is_not_asked(client_as, users, settings):
    settings.MIRRORPLANE_CLUSTER_TIMEOUT_S = 0.5
    cluster_reads.reset_breakers()
    services.cluster_create(actor=users["admin"], alias="gone", bootstrap_servers="127.0.0.1:1")
    viewer = client_as("viewer")
    response = viewer.get(reverse("web:topic", args=["gone", "orders"]))  # one read fails...
    assert response.status_code == 502
    assert "cluster gone (127.0.0.1:1)" in response.context["problem"]
    refused = viewer.get(reverse("web:topic", args=["gone", "orders"]))  # ...then the breaker answers
    assert refused.status_code == 502
    assert "did not answer the last 1 read(s)" in refused.context["problem"]
    assert "Test connection" in refused.context["problem"]
    listing = viewer.get(reverse("web:topics"), {"cluster": "gone"})
    assert listing.status_code == 200 and "did not answer" in listing.context["problem"]


def test_the_api_reads_records_and_copies_with_field_errors(client_as, flow, mirrored, settings):
    topic, remote_topic = mirrored
    settings.MIRRORPLANE_BROWSE_MASKED_TOPICS = ["browse-.*"]
    viewer = client_as("viewer")
    records = viewer.get(
        f"/api/v1/clusters/{flow.source_id}/topics/{topic}/records/", {"offset": 1, "max_records": 2}
    )
    assert records.status_code == 200, records.content.decode()
    body = records.json()
    assert [r["offset"] for r in body["records"]] == [1, 2] and body["masked"] and body["read_at"]
    assert body["records"][0]["key"]["text"] == "k1" and body["records"][0]["value"]["masked"]
    assert body["mirrors"][0]["remote_topic"] == remote_topic

    copies = viewer.get(f"/api/v1/flows/{flow.pk}/copies/", {"topic": topic, "offset": 0, "max_records": 3})
    assert copies.status_code == 200 and copies.json()["counts"] == {"equal": 3}

    bad = viewer.get(
        f"/api/v1/clusters/{flow.source_id}/topics/{topic}/records/", {"offset": "x", "time": "y"}
    )
    assert bad.status_code == 400 and set(bad.json()) == {"offset", "time"}
    unknown = viewer.get(f"/api/v1/clusters/{flow.source_id}/topics/nope-{topic}/records/")
    assert unknown.status_code == 400 and "has no topic" in unknown.json()["topic"][0]
    listing = viewer.get(f"/api/v1/clusters/{flow.source_id}/topics/")
    assert topic in [t["name"] for t in listing.json()["topics"]]


@pytest.mark.parametrize(
    ("params", "expect"),
    [
        ({}, {"offsets": list(range(RECORDS)), "format": "json"}),  # the newest 20: all 12
        ({"offset": 3, "max_records": 2}, {"offsets": [3, 4], "format": "json"}),
        ({"partition": 1, "max_records": 1}, {"partition": 1}),
        ({"offset": 3, "max_records": 1, "format": "auto"}, {"offsets": [3], "format": "json", "key": "k3"}),
        ({"offset": 3, "max_records": 1, "format": "text"}, {"offsets": [3], "format": "text", "key": "k3"}),
        ({"offset": 3, "max_records": 1, "format": "json"}, {"offsets": [3], "format": "json"}),
        ({"offset": 3, "max_records": 1, "format": "hex"}, {"offsets": [3], "format": "hex", "key": "6b 33"}),
        ({"offset": "x"}, {"error": "offset"}),
        ({"partition": -1}, {"error": "partition"}),
        ({"max_records": 501}, {"error": "max_records"}),
        ({"time": "yesterday"}, {"error": "time"}),
        ({"format": "yaml"}, {"error": "format"}),
    ],
)
def test_every_documented_query_parameter_of_the_records_api(client_as, flow, mirrored, params, expect):
    """docs/api.md: `?partition=&offset=` or `&time=`, `&max_records=`, `&format=` (auto, text, json, hex):
    `format` is the value format, never the REST framework's renderer (which answered 404 for hex)."""
    topic, _ = mirrored
    answer = client_as("viewer").get(f"/api/v1/clusters/{flow.source_id}/topics/{topic}/records/", params)
    body = answer.json()
    if "error" in expect:
        assert answer.status_code == 400 and list(body) == [expect["error"]], body
        return
    assert answer.status_code == 200, body
    if "offsets" in expect:
        assert [r["offset"] for r in body["records"]] == expect["offsets"]
    assert body["seek"]["partition"] == expect.get("partition", 0)
    assert body["seek"]["format"] == params.get("format", "auto")
    if body["records"]:
        first = body["records"][0]
        assert first["value"]["format"] == expect.get("format", first["value"]["format"])
        assert first["key"]["text"] == expect.get("key", first["key"]["text"])


def test_the_records_api_seeks_by_time_and_the_copies_api_takes_the_same_parameters(
    client_as, flow, mirrored
):
    topic, remote_topic = mirrored
    viewer = client_as("viewer")
    url = f"/api/v1/clusters/{flow.source_id}/topics/{topic}/records/"
    sixth = viewer.get(url, {"offset": 5, "max_records": 1}).json()["records"][0]
    moment = datetime.fromisoformat(sixth["timestamp"])
    for time in (sixth["timestamp"], str(int(moment.timestamp() * 1000))):  # ISO 8601 or epoch ms
        body = viewer.get(url, {"time": time, "max_records": 2}).json()
        assert body["seek"]["timestamp_ms"] == int(moment.timestamp() * 1000)
        # Kafka's ListOffsets by time answers the earliest offset whose timestamp is at or after it:
        # records produced in the same millisecond share it, so the seek may land before offset 5.
        first = body["records"][0]
        assert first["offset"] <= 5 and first["timestamp"] == sixth["timestamp"], (first, sixth)

    copies_url = f"/api/v1/flows/{flow.pk}/copies/"
    for params, offsets in (
        ({"topic": topic, "offset": 2, "max_records": 3, "format": "hex"}, [2, 3, 4]),
        ({"topic": topic, "partition": 0, "time": sixth["timestamp"], "max_records": 1}, None),
        ({"topic": topic, "offset": 0, "max_records": 2, "format": "text"}, [0, 1]),
    ):
        answer = viewer.get(copies_url, params)
        assert answer.status_code == 200, answer.content.decode()
        body = answer.json()
        shown = [c["source"]["offset"] for c in body["copies"]]
        assert shown == offsets if offsets is not None else shown and shown[0] <= 5
        assert body["seek"]["format"] == params.get("format", "auto")
        assert set(body["counts"]) == {"equal"}, body["counts"]
        if params.get("format") == "hex":
            assert body["copies"][0]["source"]["key"]["text"] == "6b 32"  # "k2"
    missing = viewer.get(copies_url, {"offset": 0})
    assert missing.status_code == 400 and "topic" in missing.json()


@pytest.mark.parametrize(
    ("params", "expect"),
    [
        ({"offset": 3, "max_records": 1, "format": "auto"}, {"offsets": [3], "format": "json", "key": "k3"}),
        ({"offset": 3, "max_records": 1, "format": "json"}, {"offsets": [3], "format": "json", "key": "k3"}),
        ({"partition": 1, "max_records": 1}, {"partition": 1}),
        ({"offset": "x"}, {"error": "offset"}),
        ({"partition": -1}, {"error": "partition"}),
        ({"max_records": 0}, {"error": "max_records"}),
        ({"time": "yesterday"}, {"error": "time"}),
        ({"format": "yaml"}, {"error": "format"}),
        ({"topic": "nope-browse-orders"}, {"error": "topic"}),
    ],
)
def test_every_documented_query_parameter_of_the_copies_api(client_as, flow, mirrored, params, expect):
    """docs/api.md: `copies/?topic=` with the records API's seek parameters; the ones the test above
    does not pass to copies/, and each one's 400 naming it."""
    answer = client_as("viewer").get(f"/api/v1/flows/{flow.pk}/copies/", {"topic": mirrored[0], **params})
    body = answer.json()
    if "error" in expect:
        assert answer.status_code == 400 and list(body) == [expect["error"]], body
        return
    assert answer.status_code == 200, body
    if "offsets" in expect:
        assert [c["source"]["offset"] for c in body["copies"]] == expect["offsets"]
    assert {c["source"]["partition"] for c in body["copies"]} <= {expect.get("partition", 0)}
    assert (body["seek"]["partition"], body["seek"]["format"]) == (
        expect.get("partition", 0),
        params.get("format", "auto"),
    )
    if "key" in expect:
        source = body["copies"][0]["source"]
        assert (source["value"]["format"], source["key"]["text"]) == (expect["format"], expect["key"])
        assert body["copies"][0]["state"] == "equal"


def test_pages_need_a_role_and_the_reset_needs_operator(client_as, users):
    services.cluster_create(actor=users["admin"], alias="X", bootstrap_servers="x.invalid:9092")
    pages = [
        reverse("web:topics"),
        reverse("web:topic", args=["X", "orders"]),
        reverse("web:groups"),
        reverse("web:group", args=["X", "billing"]),
    ]
    for url in pages:
        anonymous = client_as("anonymous").get(url)
        assert anonymous.status_code == 302 and "/login/" in anonymous["Location"], url
        assert client_as("norole").get(url).status_code == 403, url
    reset = reverse("web:group-reset", args=["X", "billing"])
    refused = client_as("viewer").post(reset, {"strategy": "earliest", "apply": "1"})
    assert refused.status_code == 403 and "operator" in refused.content.decode()


@pytest.mark.kafka
def produce_in_batches(config: ClusterConfig, topic: str) -> None:
    """500 keyed records on a new topic's one partition, in batches of 50 (as the demo's traffic writes)."""
    create_topic(config, topic, 1)
    producer = make_producer(config)
    for index in range(500):
        key, value, headers = keyed_record(index)
        producer.produce(topic, key=key, value=value, headers=headers, partition=0)
        if index % 50 == 49:
            assert producer.flush(10) == 0


@pytest.mark.kafka
def test_apache_kafka_lists_the_end_a_fetch_finds(users, cluster_a, unique_name):
    """The newest records on Apache Kafka, whose listed end is the one a fetch finds: no note."""
    produce_in_batches(cluster_a, unique_name)
    cluster = stored_cluster(actor=users["admin"], config=cluster_a)
    page = topic_records(
        cluster=cluster, topic=unique_name, seek=Seek(partition=0, max_records=20), role=None
    )
    assert [r.offset for r in page.records] == list(range(480, 500))
    assert page.partitions[0].listed_end is None and page.notes == []


def test_the_newest_records_and_their_copies_are_read_from_what_the_partition_holds(users, unique_name):
    """Issue 36 item 6: the embedded demo broker lists a partition's end below the records it holds (451
    for 500 records written in batches of 50). The records page and the compare page read from the end a
    fetch finds on both clusters: the newest records are 480-499 beside their copies, offset 480 is read
    (it was "past the partition's end"), and the page says the broker's offset answers cannot be
    trusted."""
    with embedded_clusters(["E", "F"]) as brokers:
        source, target = (
            ClusterConfig(alias=a, bootstrap_servers=brokers[a].bootstrap_servers) for a in "EF"
        )
        produce_in_batches(source, unique_name)
        remote_topic = mirror_topic(source, target, unique_name, partitions=1, records=500)
        admin = users["admin"]
        e, f = (stored_cluster(actor=admin, config=config) for config in (source, target))
        flow = mirrored_flow(actor=admin, source=e, target=f, topic=unique_name)
        newest = Seek(partition=0, max_records=20)

        page = topic_records(cluster=e, topic=unique_name, seek=newest, role=None)
        listed = page.partitions[0].listed_end
        assert listed is not None and listed < 500, "the broker lists the end right: nothing to catch"
        assert [r.offset for r in page.records] == list(range(480, 500)) and page.partitions[0].end == 500
        assert any("cannot be trusted" in note and f"offset {listed}," in note for note in page.notes)
        copied = topic_records(cluster=f, topic=remote_topic, seek=newest, role=None)
        assert [r.offset for r in copied.records] == list(range(480, 500)), copied.notes
        for seek in (newest, Seek(partition=0, offset=480, max_records=20)):
            copies = record_copies(flow=flow, topic=unique_name, seek=seek, role=None)
            assert [(c.source.offset, c.state.value) for c in copies.copies] == [
                (offset, "equal") for offset in range(480, 500)
            ], copies.notes
