"""A topic's and a cluster's pages in a real Chromium (issue 28 item 11): replication factor, retention,
size on disk, configs and what config sync will change on the copy, loaded after the records; the cluster's id and
brokers. A screenshot of each page is kept under tests/e2e/artifacts/, and of the page at a failure."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from controlplane.flows import cluster_reads
from controlplane.flows.models import Cluster
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.apache import kafka_version
from tests.e2e.conftest import kept
from tests.replication.test_log_dirs import _write
from tests.web.mirroring import mirrored_flow, stored_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def _create(cluster, name: str, configs: dict[str, str]) -> None:
    errors = TopicAdmin(cluster).create_topics([NewRemoteTopic(name, name, 3, 1, configs)])
    assert errors[name] is None, errors


def test_a_topic_page_shows_its_configs_and_what_config_sync_will_change(
    page: Page, signed_in, cluster_a, cluster_b, kafka_brokers, unique_name
):
    cluster_reads.reset_breakers()
    topic = f"e2e-configs-{unique_name}"
    _create(cluster_a, topic, {"retention.ms": "3600000", "min.insync.replicas": "1"})
    _create(cluster_b, f"A.{topic}", {"retention.ms": "60000", "segment.ms": "7200000"})
    a, b = stored_cluster(actor=None, config=cluster_a), stored_cluster(actor=None, config=cluster_b)
    mirrored_flow(actor=None, source=a, target=b, topic=topic)
    written = _write(cluster_a, topic, partition=2, count=100)

    page.goto(f"{signed_in}/topics/?cluster=A&q={topic}")
    if getattr(kafka_brokers["A"], "cluster_id", None):  # Apache Kafka: the list shows each topic's size
        expect(page.locator(f'tr[data-topic="{topic}"] td.size')).to_contain_text("KB")
        expect(page.locator("#sizes-read")).to_contain_text("sizes on disk (every replica) read at")
    page.get_by_role("link", name=topic, exact=True).click()
    with kept(page, "topic-01-details"):
        details = page.locator("#topic-details")
        expect(details).to_contain_text("Described by A at")
        expect(page.locator("#partition-count")).to_have_text("3")
        expect(page.locator("#replication-factor")).to_have_text("1")
        expect(page.locator("#retention")).to_contain_text("retention.ms 3600000")
        if getattr(kafka_brokers["A"], "cluster_id", None):  # Apache Kafka answers DescribeLogDirs
            expect(page.locator("#size")).to_contain_text("over every replica")
            expect(page.locator("#size")).to_contain_text("read at")
            assert int(page.locator("#size .size-total").get_attribute("data-bytes")) > written
            page.get_by_text("Replicas and size of each partition").click()
            expect(page.locator('#replicas tr[data-partition="2"] .leader-bytes')).to_contain_text("KB")
            expect(page.locator('#replicas tr[data-partition="0"] .leader-bytes')).to_have_text(
                re.compile(r"^0\sbytes$")
            )
        else:  # the embedded broker has no DescribeLogDirs: the page says so
            expect(page.locator("#size")).to_contain_text("size unknown: the brokers do not implement")
        sync = page.locator(".config-sync")
        expect(sync).to_contain_text("Config sync of flow A->B")
        expect(sync.locator(".sync-changes")).to_have_text("1")
        expect(sync.locator('tr[data-config="retention.ms"]')).to_have_attribute("data-action", "set")
        expect(sync.locator('tr[data-config="retention.ms"]')).to_contain_text("60000")
        expect(sync.locator('tr[data-config="min.insync.replicas"]')).to_have_attribute(
            "data-action", "excluded"
        )
        expect(sync.locator('tr[data-config="segment.ms"]')).to_have_attribute("data-action", "target only")
        page.locator("#configs summary").click()
        expect(page.locator('#configs tr[data-config="retention.ms"]')).to_contain_text("set on the topic")

    page.get_by_role("link", name="cluster A").click()
    with kept(page, "topic-02-cluster"):
        expect(page.get_by_role("heading", name="Cluster A")).to_be_visible()
        expect(page.locator("#read-at")).to_contain_text("Read from A at")
        cluster_id = getattr(kafka_brokers["A"], "cluster_id", None)
        if cluster_id:  # Apache Kafka, formatted by the suite
            expect(page.locator("#cluster-id")).to_have_text(cluster_id)
        expect(page.locator("#brokers tbody tr")).to_have_count(1)
        if cluster_id:  # Apache Kafka: its release line, from ApiVersions
            expect(page.locator("#kafka-version")).to_contain_text(
                ".".join(kafka_version().split(".")[:2]) + " "
            )
            expect(page.locator("#kafka-version")).to_contain_text("metadata.version")

    # A cluster that does not answer: the fragment explains itself instead of "Reading…" forever.
    gone = Cluster.objects.create(alias="gone", bootstrap_servers="127.0.0.1:1")
    page.goto(f"{signed_in}/topics/{gone.alias}/{topic}/")
    with kept(page, "topic-03-unreachable"):
        expect(page.locator("#details-problem")).to_contain_text("cluster gone (127.0.0.1:1)")
