"""An MM2 import's dry run previews what each imported flow would mirror (issue 28 item 2): the topics its
source holds now with their remote names, and each that would loop (copied back to its target under the
target's other alias) flagged, with a warning; through the service, the API, the command line and the web
page. The rules on the in-memory clusters (`memory_clusters`); a cluster known by the id its Apache Kafka
brokers report, on the suite's brokers."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from controlplane.core.errors import ServiceValidationError
from controlplane.flows import cluster_reads, mm2, services
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from tests.conftest import ensure_heartbeats_topic
from tests.web.mirroring import MEMORY_A, MEMORY_B

pytestmark = pytest.mark.django_db


def _stored_demo(users, unique_name, configs, create) -> tuple[str, str, str]:
    """Clusters `a` and `b` stored; on `a` (by `create`) a local topic, `b.<stem>-inventory` (a copy `b->a`
    made) and `heartbeats` (mirrored whatever the filter: always there, always counted)."""
    cluster_reads.reset_breakers()
    stem = unique_name[-8:]
    local, copy = f"p{stem}-orders", f"b.p{stem}-inventory"
    create(local, copy)
    for alias, config in zip(("a", "b"), configs, strict=True):
        services.cluster_create(actor=users["admin"], alias=alias, bootstrap_servers=config.bootstrap_servers)
    return stem, local, copy


@pytest.fixture
def ab(memory_clusters):
    """The configs of the in-memory clusters the demo stores as `a` and `b`."""
    return MEMORY_A, MEMORY_B


@pytest.fixture
def demo(users, ab, memory_clusters, unique_name):
    a = memory_clusters.cluster(MEMORY_A.bootstrap_servers)

    def create(*topics: str) -> None:
        for topic in topics:
            a.create(topic, 2)
        a.create("heartbeats", 1)

    return _stored_demo(users, unique_name, ab, create)


@pytest.fixture
def kafka_demo(users, cluster_a, cluster_b, unique_name):
    def create(*topics: str) -> None:
        created = TopicAdmin(cluster_a).create_topics([NewRemoteTopic(t, t, 2, 1, {}) for t in topics])
        assert created == dict.fromkeys(topics)
        ensure_heartbeats_topic(cluster_a)

    return _stored_demo(users, unique_name, (cluster_a, cluster_b), create)


def _seeds(cluster_a, cluster_b, stem: str, *, extra: str = "") -> str:
    """The demo's clusters under other aliases (DC1 = a, DC2 = b), as the seeds' file names them."""
    return f"""
clusters = DC1, DC2
DC1.bootstrap.servers = {cluster_a.bootstrap_servers}
DC2.bootstrap.servers = {cluster_b.bootstrap_servers}
DC1->DC2.enabled = true
DC1->DC2.topics = p{stem}-.*, b\\.p{stem}-.*
{extra}"""


def test_the_dry_run_lists_each_flows_topics_and_flags_a_copy_coming_back(users, demo, ab):
    stem, local, copy = demo
    result = mm2.mm2_import(actor=users["admin"], text=_seeds(*ab, stem), dry_run=True, force=True)
    (preview,) = result.previews
    assert preview.flow == "DC1->DC2" and preview.problem is None and preview.read_at is not None
    topics = {t.topic: t for t in preview.replicated}
    assert set(topics) == {local, copy, "heartbeats"} and preview.replicated_count == 3
    assert topics[local].remote_topic == f"DC1.{local}" and topics[local].loop is None
    assert topics[copy].remote_topic == f"DC1.{copy}"
    assert topics[copy].loop.startswith(f"{copy} came from b, which is DC2 under another alias")
    assert preview.loop_count == 1 and preview.replicated[0].topic == copy  # loops first
    assert "replication loop: DC1->DC2 would copy 1 topic(s) back where they came from" in result.warnings


def test_a_flow_within_one_cluster_loops_on_every_topic_and_a_silent_source_is_named(
    users, demo, ab, memory_clusters
):
    stem, local, copy = demo
    memory_clusters.cluster("127.0.0.1:1").unreachable = "connection refused"
    text = _seeds(
        *ab,
        stem,
        extra=f"""
clusters = DC1, DC2, gone, a
gone.bootstrap.servers = 127.0.0.1:1
a.bootstrap.servers = {ab[0].bootstrap_servers}
DC1->a.enabled = true
DC1->a.topics = p{stem}-.*
gone->DC2.enabled = true
""",
    )
    result = mm2.mm2_import(actor=users["admin"], text=text, dry_run=True, force=True)
    previews = {p.flow: p for p in result.previews}
    within = previews["DC1->a"]
    assert within.same_cluster.startswith("DC1 and a are one cluster")
    assert {(t.topic, t.loop) for t in within.replicated} == {(local, "DC1 is a"), ("heartbeats", "DC1 is a")}
    assert "cluster gone (127.0.0.1:1)" in previews["gone->DC2"].problem
    assert previews["gone->DC2"].replicated == ()


def test_the_api_the_command_and_the_page_show_the_preview(users, demo, ab, client_as):
    stem, local, copy = demo
    text = _seeds(*ab, stem)
    response = client_as("admin").post(
        "/api/v1/mm2/import/", {"text": text, "dry_run": True, "force": True}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    (preview,) = response.json()["previews"]
    assert preview["loop_count"] == 1 and preview["replicated"][0]["topic"] == copy
    assert preview["replicated"][0]["loop"].startswith(f"{copy} came from b")

    out = io.StringIO()
    path = f"/tmp/pages-seeds-{stem}.properties"
    with open(path, "w") as file:
        file.write(text)
    call_command("import_mm2", path, "--dry-run", "--force", stdout=out, stderr=io.StringIO())
    printed = out.getvalue()
    assert "flow DC1->DC2 would mirror 3 topic(s), 1 looping" in printed  # with heartbeats
    assert re.search(
        rf"{re.escape(copy)} -> DC1\.{re.escape(copy)}  LOOP: {re.escape(copy)} came from b", printed
    )

    web = Client()
    web.force_login(users["admin"])
    page = web.post(reverse("web:mm2-import"), {"text": text, "force": "on", "dry_run": "1"})
    body = page.content.decode()
    assert page.status_code == 200 and 'data-flow="DC1-&gt;DC2" data-loops="1"' in body
    assert f'<tr class="loop" data-topic="{copy}">' in body and "replication loop: DC1-&gt;DC2" in body


@pytest.mark.kafka
def test_a_cluster_reached_by_another_name_is_known_by_its_cluster_id(
    users, kafka_demo, cluster_a, cluster_b
):
    """DC1 names a's broker as localhost, DC2 b's as 127.0.0.1: no bootstrap server is shared, the brokers'
    cluster ids say they are a and b."""
    stem, local, copy = kafka_demo
    text = _seeds(cluster_a, cluster_b, stem).replace(
        f"DC1.bootstrap.servers = {cluster_a.bootstrap_servers}",
        f"DC1.bootstrap.servers = localhost:{cluster_a.bootstrap_servers.rsplit(':', 1)[1]}",
    )
    with pytest.raises(ServiceValidationError) as refused:
        mm2.mm2_import(actor=users["admin"], text=text, dry_run=True)
    (message,) = refused.value.errors["clusters.DC1.bootstrap_servers"]
    assert message.startswith("DC1 is cluster a under another alias (both report cluster id ")
    assert "clusters.DC2.bootstrap_servers" in refused.value.errors  # b by its broker, as before

    forced = mm2.mm2_import(actor=users["admin"], text=text, dry_run=True, force=True)
    (preview,) = forced.previews
    assert [t.topic for t in preview.replicated if t.loop] == [copy]
