"""The "take over from MM2" page: operators read the dry run per partition and apply it (embedded brokers)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from controlplane import cluster_reads, services
from tests.replication.test_takeover import stopped_mm2
from tests.web.mirroring import stored_cluster

pytestmark = [pytest.mark.kafka, pytest.mark.django_db]


def test_the_takeover_page_shows_the_dry_run_and_applies_it(
    client_as, users, cluster_a, cluster_b, unique_name
):
    cluster_reads.reset_breakers()
    admin = users["admin"]
    a, b = (stored_cluster(actor=admin, config=c) for c in (cluster_a, cluster_b))
    offsets_topic = f"mm2-offsets-{unique_name}"
    stopped_mm2(
        cluster_a, cluster_b, physical=(cluster_a, cluster_b), topic=unique_name, offsets_topic=offsets_topic
    )
    flow = services.flow_create(
        actor=admin, source=a, target=b, enabled=True, topics=[re.escape(unique_name)]
    )
    url = reverse("web:mm2-takeover")
    assert client_as("viewer").get(url).status_code == 403
    assert reverse("web:mm2-takeover") in client_as("admin").get(reverse("web:mm2-import")).content.decode()

    form = {"flow": flow.pk, "offsets_topic": offsets_topic, "connector": "MirrorSourceConnector"}
    dry = client_as("operator").post(url, form)
    assert dry.status_code == 200, dry.content.decode()
    page = dry.content.decode()
    assert "Dry run: nothing changed yet" in page and "not copied again" in page
    assert "pause (or disable) the flow" in page  # the flow still replicates: apply would be refused
    assert [p.next_offset for p in dry.context["result"].plan.partitions] == [30, 25, None]

    refused = client_as("operator").post(url, {**form, "apply": "1"})
    assert refused.status_code == 409 and "pause" in refused.content.decode()
    services.flow_pause(actor=admin, flow=flow)
    applied = client_as("operator").post(url, {**form, "apply": "1"}, follow=True)
    assert applied.status_code == 200
    assert "Applied: 2 positions stored" in applied.content.decode()
