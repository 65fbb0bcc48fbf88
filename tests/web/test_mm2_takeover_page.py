"""The "take over from MM2" page: operators queue the dry run (the request answers at once with the
operation's page), its card polls until a worker ends it and then shows the plan per partition, and a
finished dry run offers apply (embedded brokers; the operations run in process, as a worker runs them)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from controlplane import operations
from controlplane.flows import cluster_reads, services
from controlplane.operations.models import Operation
from tests.replication.test_takeover import stopped_mm2
from tests.web.mirroring import stored_cluster

pytestmark = [pytest.mark.kafka, pytest.mark.django_db]


def test_the_takeover_page_queues_the_dry_run_shows_it_and_applies_it(
    client_as, users, cluster_a, cluster_b, unique_name
):
    cluster_reads.reset_breakers()
    admin = users["admin"]
    a, b = (stored_cluster(actor=admin, config=c) for c in (cluster_a, cluster_b))
    offsets_topic = f"mm2-offsets-{unique_name}"
    stopped_mm2(
        cluster_a, cluster_b, physical=(cluster_a, cluster_b), topic=unique_name, offsets_topic=offsets_topic
    )
    # Only this test's topic: an earlier test's flow may have written A's heartbeats topic, which a flow
    # mirrors whatever its topic filter unless heartbeats.replication.enabled is false.
    flow = services.flow_create(
        actor=admin,
        source=a,
        target=b,
        enabled=True,
        topics=[re.escape(unique_name)],
        heartbeats_replication_enabled=False,
    )
    url = reverse("web:mm2-takeover")
    assert client_as("viewer").get(url).status_code == 403
    assert reverse("web:mm2-takeover") in client_as("admin").get(reverse("web:mm2-import")).content.decode()
    operator = client_as("operator")

    form = {"flow": flow.pk, "offsets_topic": offsets_topic, "connector": "MirrorSourceConnector"}
    bad = operator.post(url, {**form, "connector": "Mirror\x00"})
    assert bad.status_code == 400 and "connector: holds a NUL character" in bad.content.decode()
    queued = operator.post(url, form)
    assert queued.status_code == 303  # answered at once: nothing was read in the request
    dry_run = Operation.objects.get(flow=flow)
    assert queued["Location"] == f"{url}?flow={flow.pk}&operation={dry_run.pk}" and dry_run.active
    waiting = operator.get(queued["Location"]).content.decode()
    assert "waiting for a worker" in waiting and "?polling=1" in waiting  # the card polls
    assert operator.post(url, form).status_code == 409  # one operation of the flow at a time

    operations.run_operation(operation_id=dry_run.pk, worker="test-worker")
    polled = operator.get(reverse("web:operation", args=[flow.pk, dry_run.pk]), {"polling": "1"})
    assert polled["HX-Refresh"] == "true"  # ended: the page reloads to show the result
    page = operator.get(queued["Location"]).content.decode()
    assert "Dry run: nothing changed yet" in page and "not copied again" in page
    assert "pause (or disable) the flow" in page  # the flow still replicates: apply would be refused
    assert re.findall(r"<strong>(\d+)</strong></td>", page) == ["30", "25"]  # partition 2: earliest
    assert f'name="from_dry_run" value="{dry_run.pk}"' in page and offsets_topic in page

    apply = {"flow": flow.pk, "from_dry_run": dry_run.pk, "apply": "1"}
    refused = operator.post(url, apply)
    assert refused.status_code == 409 and "pause" in refused.content.decode()
    services.flow_pause(actor=admin, flow=flow)
    applying = operator.post(url, apply)
    assert applying.status_code == 303
    applied = Operation.objects.get(flow=flow, dry_run=False)
    operations.run_operation(operation_id=applied.pk, worker="test-worker")
    page = operator.get(applying["Location"]).content.decode()
    assert "Applied: 2 positions stored" in page and "Apply: store these positions" not in page
    assert "takes over from MM2" in page and reverse("web:flow", args=[flow.pk]) in page
