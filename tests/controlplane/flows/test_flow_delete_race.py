"""Deleting a flow while a worker writes one of its rows (status, event, signals), on PostgreSQL: the delete
succeeds and the late write fails, never the other way round (CI saw the delete fail at commit with a
ForeignKeyViolation: a worker's status row had landed after the cascade read the flow's rows)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import IntegrityError, connection
from django.db.models.signals import post_delete
from django.utils import timezone

from controlplane.flows import services
from controlplane.flows.models import Flow
from controlplane.status import runtime
from controlplane.status.models import FlowEvent, FlowEventKind


def _blocked_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # else a transaction sees its first snapshot
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.django_db(transaction=True)
def test_a_flow_deleted_while_a_worker_writes_its_rows_is_deleted_and_the_late_write_fails():
    if connection.vendor != "postgresql":
        pytest.skip("row locks and deferred foreign keys as in production: set DATABASE_URL to PostgreSQL")
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers="a.example:9092")
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers="b.example:9092")
    flow = services.flow_create(actor=None, source=a, target=b)
    runtime.flow_event_record(flow_id=flow.pk, kind=FlowEventKind.INFO, message="before", at=timezone.now())
    late: list[object] = []

    def worker_writes_an_event() -> None:
        try:
            runtime.flow_event_record(
                flow_id=flow.pk, kind=FlowEventKind.INFO, message="late", at=timezone.now()
            )
            late.append("written")
        except IntegrityError as exc:
            late.append(exc)
        finally:
            connection.close()  # this thread's own connection

    worker = threading.Thread(target=worker_writes_an_event)

    def between_the_cascade_and_the_flow_row(**_kwargs) -> None:
        """The flow's events are deleted, the flow's row not yet: the worker writes now."""
        if worker.ident is not None:
            return
        worker.start()
        deadline = time.monotonic() + 30
        while worker.is_alive() and not _blocked_on_a_lock():
            assert time.monotonic() < deadline, "the worker's write neither ended nor waited for a lock"
            time.sleep(0.02)

    post_delete.connect(between_the_cascade_and_the_flow_row, sender=FlowEvent, weak=False)
    try:
        services.flow_delete(actor=None, flow=flow)
    finally:
        post_delete.disconnect(between_the_cascade_and_the_flow_row, sender=FlowEvent)
        worker.join(30)

    assert worker.ident is not None  # the cascade did delete an event
    assert not Flow.objects.filter(pk=flow.pk).exists()
    assert not FlowEvent.objects.filter(flow_id=flow.pk).exists()
    assert len(late) == 1 and isinstance(late[0], IntegrityError), late
