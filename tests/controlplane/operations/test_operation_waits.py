"""Operations say what they wait for: one column per wait (drain, fence, record wait, client), filled
from the one `timeout_s` of earlier releases by migration 0028; the API, the web forms and the command
line take each wait by its name, and the API still takes `timeout_s` (deprecated) for the waits it meant."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from controlplane.flows import services
from controlplane.operations import plans
from controlplane.operations.models import Operation
from replication import failover

pytestmark = pytest.mark.django_db

BEFORE, AFTER = ("controlplane", "0027_records_aborted"), ("controlplane", "0028_operation_waits")
WAITS = ("drain_timeout_s", "fence_timeout_s", "record_wait_s", "client_timeout_s")


@pytest.fixture
def flow(admin_user, two_clusters):
    a, b = two_clusters
    return services.flow_create(actor=admin_user, source=a, target=b, enabled=True, topics=["orders"])


def _migrate(target: tuple[str, str]):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    executor.loader.build_graph()
    return executor.loader.project_state([target]).apps


def test_the_migration_moves_each_kinds_timeout_into_the_waits_it_meant_and_back(flow):
    old = _migrate(BEFORE).get_model("controlplane", "Operation")
    timeouts = {"failover": 11.0, "failback": 12.0, "drill": 13.0, "cutover": 14.0, "takeover": 15.0}
    ids = {
        kind: old.objects.create(kind=kind, flow_id=flow.pk, timeout_s=timeout_s, active=False).pk
        for kind, timeout_s in timeouts.items()
    }
    with connection.cursor() as cursor:  # the rows' foreign keys checked now, before the tables change
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    new = _migrate(AFTER).get_model("controlplane", "Operation")
    after = {kind: new.objects.values(*WAITS).get(pk=pk) for kind, pk in ids.items()}
    assert after == {
        "failover": {"drain_timeout_s": 11.0, "fence_timeout_s": None, "record_wait_s": None, "client_timeout_s": None},
        "failback": {"drain_timeout_s": 12.0, "fence_timeout_s": None, "record_wait_s": None, "client_timeout_s": None},
        "drill": {"drain_timeout_s": 13.0, "fence_timeout_s": None, "record_wait_s": 13.0, "client_timeout_s": None},
        "cutover": {"drain_timeout_s": 14.0, "fence_timeout_s": 14.0, "record_wait_s": None, "client_timeout_s": None},
        "takeover": {"drain_timeout_s": None, "fence_timeout_s": None, "record_wait_s": None, "client_timeout_s": 15.0},
    }  # fmt: skip
    new.objects.filter(pk=ids["cutover"]).update(fence_timeout_s=99.0)  # back: the kind's first wait
    old = _migrate(BEFORE).get_model("controlplane", "Operation")
    assert dict(old.objects.values_list("kind", "timeout_s")) == timeouts
    _migrate(AFTER)


def _operation(response) -> Operation:
    assert response.status_code == 202, response.content
    return Operation.objects.get(pk=response.json()["id"])


def _waits(operation: Operation) -> dict[str, float]:
    return {wait: getattr(operation, wait) for wait in WAITS if getattr(operation, wait) is not None}


def test_the_api_takes_each_wait_by_name_and_timeout_s_for_the_waits_it_meant(flow, client_as):
    api, url = client_as("operator"), f"/api/v1/flows/{flow.pk}"

    def queue(path: str, body: dict) -> dict[str, float]:
        operation = _operation(api.post(f"{url}/{path}/", body, format="json"))
        Operation.objects.filter(pk=operation.pk).update(active=False)
        return _waits(operation)

    failover = {"groups": ["billing"], "confirm": "A->B"}
    cutover = {"confirm": "A->B", "dry_run": True, "fence_s": 5}
    assert queue("failover", failover) == {"drain_timeout_s": 300.0}  # the defaults
    assert queue("drills", {"groups": ["billing"]}) == {"drain_timeout_s": 30.0, "record_wait_s": 30.0}
    assert queue("cutover", cutover) == {"drain_timeout_s": 300.0, "fence_timeout_s": 300.0}
    assert queue("failover", {**failover, "drain_timeout_s": 45}) == {"drain_timeout_s": 45.0}
    drill = {"groups": ["billing"], "drain_timeout_s": 5, "record_wait_s": 7}
    assert queue("drills", drill) == {"drain_timeout_s": 5.0, "record_wait_s": 7.0}
    assert queue("cutover", {**cutover, "fence_timeout_s": 20, "drain_timeout_s": 40}) == {
        "drain_timeout_s": 40.0,
        "fence_timeout_s": 20.0,
    }
    # Deprecated: `timeout_s` sets every wait of the kind it meant that the request does not name.
    assert queue("failover", {**failover, "timeout_s": 50}) == {"drain_timeout_s": 50.0}
    assert queue("drills", {"groups": ["billing"], "timeout_s": 9}) == {
        "drain_timeout_s": 9.0,
        "record_wait_s": 9.0,
    }
    assert queue("cutover", {**cutover, "timeout_s": 11, "fence_timeout_s": 20}) == {
        "drain_timeout_s": 11.0,
        "fence_timeout_s": 20.0,
    }
    shown = api.get(f"/api/v1/operations/?flow={flow.pk}&kind=drill").json()["results"][0]
    assert {name: shown[name] for name in (*WAITS, "timeout_s")} == {
        "drain_timeout_s": 9.0,
        "fence_timeout_s": None,
        "record_wait_s": 9.0,
        "client_timeout_s": None,
        "timeout_s": 9.0,
    }


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("failover", {"groups": ["g"], "confirm": "A->B", "drain_timeout_s": -1}, "drain_timeout_s"),
        ("failover", {"groups": ["g"], "confirm": "A->B", "drain_timeout_s": 3601}, "drain_timeout_s"),
        ("failover", {"groups": ["g"], "confirm": "A->B", "timeout_s": "x"}, "timeout_s"),
        ("failback", {"confirm": "A->B", "drain_timeout_s": "nan"}, "drain_timeout_s"),
        ("drills", {"groups": ["g"], "record_wait_s": 601}, "record_wait_s"),
        ("drills", {"groups": ["g"], "drain_timeout_s": "1e400"}, "drain_timeout_s"),
        ("cutover", {"confirm": "A->B", "fence_timeout_s": 0}, "fence_timeout_s"),
        ("cutover", {"confirm": "A->B", "fence_s": 30, "fence_timeout_s": 20}, "fence_timeout_s"),
        ("cutover", {"confirm": "A->B", "drain_timeout_s": "soon"}, "drain_timeout_s"),
    ],
)
def test_a_bad_wait_is_a_400_naming_its_field_and_queues_nothing(flow, client_as, path, body, field):
    answer = client_as("operator").post(f"/api/v1/flows/{flow.pk}/{path}/", body, format="json")
    assert answer.status_code == 400 and list(answer.json()) == [field], answer.content
    assert not Operation.objects.exists()


def test_the_schema_names_each_wait_and_deprecates_timeout_s(client_as):
    schemas = client_as("viewer").get("/api/schema/?format=json").json()["components"]["schemas"]
    waits = {
        name: {field for field in schemas[f"{name}Request"]["properties"] if field.endswith("_s")}
        for name in ("FailoverRequest", "FailbackRequest", "DrillRequest", "CutoverRequest")
    }
    assert waits == {
        "FailoverRequest": {"drain_timeout_s", "timeout_s"},
        "FailbackRequest": {"drain_timeout_s", "timeout_s"},
        "DrillRequest": {"drain_timeout_s", "record_wait_s", "timeout_s"},
        "CutoverRequest": {"fence_s", "fence_timeout_s", "drain_timeout_s", "timeout_s"},
    }
    assert all(schemas[f"{name}Request"]["properties"]["timeout_s"]["deprecated"] for name in waits)
    assert schemas["Operation"]["properties"]["timeout_s"]["deprecated"]
    assert set(WAITS) <= set(schemas["Operation"]["properties"])


def _empty_plan() -> failover.FailoverPlan:
    return failover.FailoverPlan(
        flow="A->B",
        built_at=time.time(),
        source_reachable=True,
        heartbeat_age_s=None,
        partitions=(),
        groups=(),
        checklist=(),
        records_at_risk=0,
        seconds_behind=0.0,
    )


def test_the_web_failover_form_sets_the_drain_wait_and_names_a_bad_one(flow, tokens):
    web = Client()
    web.force_login(get_user_model().objects.get(username="operator"))
    drills = web.get(f"/flows/{flow.pk}/drills/").content.decode()
    cutover = web.get(f"/flows/{flow.pk}/cutover/").content.decode()
    assert 'name="drain_timeout_s"' in drills and 'name="record_wait_s"' in drills
    assert 'name="drain_timeout_s"' in cutover and 'name="fence_timeout_s"' in cutover
    assert 'name="timeout_s"' not in drills + cutover
    cache.set(plans.PLAN_KEY.format(flow.pk), plans.StoredPlan(_empty_plan(), "", time.time()))
    form = web.get(f"/flows/{flow.pk}/failover/plan/").content.decode().split("failover/execute/")[1]
    cache.delete(plans.PLAN_KEY.format(flow.pk))
    assert 'name="drain_timeout_s" type="number" min="0" max="3600" value="300"' in form
    body = {"groups": ["billing"], "confirm": "A->B"}
    bad = web.post(f"/flows/{flow.pk}/failover/execute/", {**body, "drain_timeout_s": "later"})
    assert "drain_timeout_s: &#x27;later&#x27; is not a number of seconds" in bad.content.decode()
    assert not Operation.objects.exists()
    queued = web.post(f"/flows/{flow.pk}/failover/execute/", {**body, "drain_timeout_s": "120"})
    assert queued.status_code == 202, queued.content.decode()
    assert _waits(Operation.objects.get(flow=flow, kind="failover")) == {"drain_timeout_s": 120.0}


def test_the_command_line_takes_the_drain_timeout_and_its_deprecated_name(flow):
    for option in ("--drain-timeout", "--timeout"):
        call_command(
            "failover", flow.name, "--groups", "billing", "--confirm", "A->B", option, "75", "--async"
        )
        queued = Operation.objects.get(flow=flow, active=True)
        assert _waits(queued) == {"drain_timeout_s": 75.0}
        Operation.objects.filter(pk=queued.pk).update(active=False)
