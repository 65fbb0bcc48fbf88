"""Statements compiled once per process (`controlplane.core.statements`): a call gives what the ORM gives for
the same queryset (model instances with their related rows, dicts, tuples), in one statement, compiled once
per shape; a value the SQL does not carry as it is leaves the shape uncached; the suite's check mode (on for
every test) catches a builder whose SQL depends on a value."""

from __future__ import annotations

import datetime
import logging

import pytest
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.core import statements
from controlplane.core.statements import Statement, StatementMismatch
from controlplane.flows.models import Cluster, Flow
from controlplane.flows.selectors import flow_list
from controlplane.status.models import FlowEvent


@pytest.fixture
def flows(db):
    a, b, c = (Cluster.objects.create(alias=alias, bootstrap_servers=f"{alias}:9092") for alias in "ABC")
    return [
        Flow.objects.create(source=source, target=target, topics=["orders"])
        for source, target in ((a, b), (b, a), (a, c), (c, b))
    ]


def _compiles(monkeypatch) -> list[str]:
    """The SQL the ORM compiles from here on."""
    from django.db.models.sql.compiler import SQLCompiler

    compiled: list[str] = []
    as_sql = SQLCompiler.as_sql

    def counted(self, *args, **kwargs):
        sql, params = as_sql(self, *args, **kwargs)
        compiled.append(sql)
        return sql, params

    monkeypatch.setattr(SQLCompiler, "as_sql", counted)
    return compiled


def test_model_instances_with_their_related_rows_as_the_orm_reads_them(flows, monkeypatch):
    shown = Statement(lambda pk: flow_list(cluster_aliases_only=True).filter(pk=pk))
    settings_check = statements.settings.MIRRORPLANE_STATEMENTS_CHECK
    monkeypatch.setattr(statements.settings, "MIRRORPLANE_STATEMENTS_CHECK", False)
    compiled = _compiles(monkeypatch)
    for flow in flows:
        with CaptureQueriesContext(connection) as queries:
            [read] = shown(pk=flow.pk)
            assert (read.pk, read.name, read.source.alias, read.target.alias, read.topics) == (
                flow.pk,
                flow.name,
                flow.source.alias,
                flow.target.alias,
                ["orders"],
            )
        assert len(queries) == 1  # the clusters came with it
        assert str(flow.pk) in queries[0]["sql"]
    assert len(compiled) == 1  # compiled once, for the first call
    assert shown(pk=max(f.pk for f in flows) + 1) == []
    assert settings_check  # the suite runs in check mode


def test_values_annotations_and_collections_whose_length_is_a_shape(flows, monkeypatch):
    now = timezone.now()
    for flow in flows:
        for index in range(flow.pk % 3 + 1):
            FlowEvent.objects.create(flow=flow, kind="info", message=f"m{index}", at=now)
    per_flow = Statement(
        lambda flow_ids, since: (
            FlowEvent.objects.filter(flow_id__in=flow_ids, at__gte=since)
            .values("flow_id")
            .annotate(events=Count("id"))
            .order_by("flow_id")
        )
    )
    compiled = _compiles(monkeypatch)
    expected = {f.pk: f.pk % 3 + 1 for f in flows}
    ids = [f.pk for f in flows]
    early = now - datetime.timedelta(seconds=1)
    assert {r["flow_id"]: r["events"] for r in per_flow(flow_ids=ids, since=early)} == expected
    assert {r["flow_id"]: r["events"] for r in per_flow(flow_ids=set(ids[:2]), since=early)} == {
        pk: expected[pk] for pk in ids[:2]
    }
    assert per_flow(flow_ids=ids, since=now + datetime.timedelta(seconds=1)) == []
    assert per_flow(flow_ids=list(reversed(ids)), since=early) == per_flow(flow_ids=ids, since=early)
    plans = len([sql for sql in compiled if "stand-in" not in sql])
    assert plans >= 2  # lengths 4 and 2: a plan each (check mode compiles every call as well)
    names = Statement(lambda pk: Flow.objects.filter(pk=pk).values_list("source__alias", "target__alias"))
    assert names(pk=flows[1].pk) == [("B", "A")]


def test_a_value_the_sql_does_not_carry_as_it_is_is_not_cached(flows, caplog):
    searched = Statement(lambda text: Cluster.objects.filter(alias__icontains=text).order_by("alias"))
    with caplog.at_level(logging.WARNING, logger="controlplane.core.statements"):
        assert [c.alias for c in searched(text="a")] == ["A"]
        assert [c.alias for c in searched(text="c")] == ["C"]
    assert "not compared as they are" in caplog.text
    assert caplog.text.count("not compared as they are") == 1  # said once: the shape is remembered
    Flow.objects.update(enabled=True)
    Flow.objects.filter(pk=flows[0].pk).update(enabled=False)
    enabled = Statement(lambda enabled: Flow.objects.filter(enabled=enabled).order_by("pk"))
    assert [f.pk for f in enabled(enabled=True)] == [f.pk for f in flows[1:]]
    assert [f.pk for f in enabled(enabled=False)] == [flows[0].pk]  # a bool is a shape of its own
    of_source = Statement(lambda alias: Flow.objects.filter(source__alias=alias).order_by("pk"))
    assert [f.pk for f in of_source(alias=None)] == []  # IS NULL: a shape of its own too
    assert [f.pk for f in of_source(alias="B")] == [flows[1].pk]


def test_check_mode_catches_a_builder_whose_sql_depends_on_a_value(flows):
    def build(pk):
        rows = Flow.objects.filter(pk=pk)
        return rows.filter(enabled=True) if pk > 0 else rows  # the stand-in takes the other branch

    with pytest.raises(StatementMismatch, match="the ORM compiles"):
        Statement(build)(pk=flows[0].pk)


def test_an_empty_collection_answers_nothing_without_a_statement(flows, caplog):
    of_flows = Statement(lambda flow_ids: Flow.objects.filter(pk__in=flow_ids))
    with caplog.at_level(logging.WARNING, logger="controlplane.core.statements"):
        with CaptureQueriesContext(connection) as queries:
            assert of_flows(flow_ids=[]) == []
        assert len(queries) == 0
        assert [f.pk for f in of_flows(flow_ids=[flows[0].pk])] == [flows[0].pk]
    assert caplog.text == ""


@pytest.mark.django_db(transaction=True)
def test_threads_share_a_plan_each_on_its_own_connection_with_its_own_values():
    """gunicorn's threads call the same statements at once: each call runs on its thread's connection with
    its own values, whatever the others do meanwhile."""
    import threading

    from django.db import connections

    a, b, c = (Cluster.objects.create(alias=alias, bootstrap_servers=f"{alias}:9092") for alias in "ABC")
    flows = [Flow.objects.create(source=s, target=t) for s, t in ((a, b), (b, a), (a, c), (c, b))]
    shown = Statement(lambda pk: flow_list(cluster_aliases_only=True).filter(pk=pk))
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def read(flow: Flow) -> None:
        try:
            start.wait()
            for _ in range(50):
                [got] = shown(pk=flow.pk)
                assert (got.pk, got.source.alias, got.target.alias) == (
                    flow.pk,
                    flow.source.alias,
                    flow.target.alias,
                )
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=read, args=(flow,)) for flow in flows]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
