"""A flow's verification backlog on PostgreSQL: stored by the run that leaves it (when it changes, and once a
minute while it does not), shown on the flow page and in /metrics with its age, stale once the verifier
stopped, and never read from the partitions' rows."""

from __future__ import annotations

import datetime
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.assurance.models import PartitionVerification, VerificationBacklog
from controlplane.assurance.verification import verification_rows, verification_run_record
from controlplane.flows import services
from controlplane.metrics import prometheus
from replication.verification import PartitionOutcome
from replication.verification_backlog import BACKLOG_REFRESH_S, NOTHING_WAITS, Backlog

MINUTE = datetime.timedelta(minutes=1)


@pytest.fixture
def flow(two_clusters, admin_user):
    a, b = two_clusters
    flow = services.flow_create(
        actor=admin_user, source=a, target=b, enabled=True, emit_heartbeats_enabled=False
    )
    for partition in range(3):
        PartitionVerification.objects.create(
            flow=flow, topic="t", partition=partition, status="ok", verified_from=0, verified_up_to=10,
            checked_at=timezone.now(),
        )  # fmt: skip
    return flow


def record(flow, backlog: Backlog, *, at: datetime.datetime, outcomes=()) -> list[str]:
    """A run's outcome stored; the statements it issued."""
    with CaptureQueriesContext(connection) as queries:
        verification_run_record(
            flow_id=flow.pk,
            stored=verification_rows(flow_id=flow.pk),
            outcomes=list(outcomes),
            partitions={("t", p) for p in range(3)},
            at=at,
            backlog=backlog,
        )
    return [q["sql"] for q in queries.captured_queries]


def page(flow, user) -> str:
    browser = Client()
    browser.force_login(user)
    return browser.get(f"/flows/{flow.pk}/").content.decode()


def test_a_run_that_leaves_records_waiting_shows_them_with_the_longest_wait_and_exports_them(
    flow, admin_user, client_as
):
    now = timezone.now()
    record(flow, Backlog(2, 120, now - 20 * MINUTE), at=now)
    row = VerificationBacklog.objects.get(flow=flow)
    assert (row.partitions_waiting, row.records_waiting, row.observed_at) == (2, 120, now)
    shown = page(flow, admin_user)
    backlog = re.search(r'id="verification-backlog">(.*?)</p>', shown, re.S).group(1)
    assert "120 records in 2 partitions wait for verification, the longest 20 min" in backlog
    assert "the verifier reads less than the flow writes" in backlog and "error-text" in backlog
    assert "last seen" not in backlog  # fresh
    exposition = prometheus.exposition().decode()
    assert 'mirrorplane_verification_records_waiting{flow="A->B",source="A",target="B"} 120.0' in exposition
    wait = re.search(r'mirrorplane_verification_longest_wait_seconds\{flow="A->B"[^}]*\} (\S+)', exposition)
    assert 1200 <= float(wait.group(1)) < 1300
    answer = client_as("viewer").get(f"/api/v1/flows/{flow.pk}/verification/").json()["backlog"]
    assert (answer["partitions_waiting"], answer["records_waiting"], answer["behind"]) == (2, 120, True)
    assert 1200 <= answer["longest_wait_s"] < 1300 and answer["stale"] is False and answer["age_s"] < 60


def test_an_unchanged_backlog_is_written_once_a_minute_and_nothing_waiting_is_said(flow, admin_user):
    now = timezone.now()
    record(flow, NOTHING_WAITS, at=now)
    again = record(flow, NOTHING_WAITS, at=now + datetime.timedelta(seconds=BACKLOG_REFRESH_S - 1))
    assert again and all(sql.startswith("SELECT") for sql in again), again  # read, not written
    assert VerificationBacklog.objects.get(flow=flow).observed_at == now
    due = now + datetime.timedelta(seconds=BACKLOG_REFRESH_S)
    assert any(sql.startswith("UPDATE") for sql in record(flow, NOTHING_WAITS, at=due))
    assert VerificationBacklog.objects.get(flow=flow).observed_at == due
    changed = Backlog(1, 5, due)
    record(flow, changed, at=due + datetime.timedelta(seconds=1))
    assert VerificationBacklog.objects.get(flow=flow).records_waiting == 5
    record(flow, NOTHING_WAITS, at=timezone.now())
    assert "Nothing waits for verification" in page(flow, admin_user)


def test_a_backlog_the_verifier_stopped_refreshing_is_shown_stale_and_not_exported(flow, admin_user):
    long_ago = timezone.now() - 10 * MINUTE
    record(flow, Backlog(3, 30, long_ago), at=long_ago)
    backlog = re.search(r'id="verification-backlog">(.*?)</p>', page(flow, admin_user), re.S).group(1)
    assert "last seen 10 min" in backlog and "badge stale" in backlog
    exposition = prometheus.exposition().decode()
    assert "mirrorplane_verification_records_waiting{" not in exposition
    assert "mirrorplane_verification_longest_wait_seconds{" not in exposition


def test_the_backlog_is_stored_with_the_runs_rows_in_one_transaction(flow):
    now = timezone.now()
    outcome = PartitionOutcome("t", 0, "A.t", "ok", verified_from=0, verified_up_to=20, checked=True)
    statements = record(flow, Backlog(2, 40, now), at=now, outcomes=[outcome])
    writes = [sql for sql in statements if not sql.startswith("SELECT")]
    assert writes[0] == "SAVEPOINT" or writes[0].startswith("SAVEPOINT"), writes
    assert [sql.split()[0] for sql in writes[1:-1]] == ["INSERT", "INSERT"], writes
    assert PartitionVerification.objects.get(flow=flow, partition=0).verified_up_to == 20
