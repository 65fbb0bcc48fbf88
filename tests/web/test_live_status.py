"""One staleness rule for the pages and the API: figures carry their age; stale is never shown healthy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from prometheus_client.parser import text_string_to_metric_families

from controlplane import assurance
from controlplane.core import presence
from controlplane.flows import lifecycle
from controlplane.flows.models import Flow
from controlplane.metrics import prometheus
from controlplane.status import activity, rollup
from controlplane.status.budgets import DEFAULT_BUDGET, RpoBudget
from controlplane.status.models import FlowPartitionStatus, PartitionState
from tests.status_reports import stored_report, task_rollup_rebuild

pytestmark = pytest.mark.django_db

STALE_AFTER = 10.0


def _row(
    flow,
    partition: int,
    *,
    age_s: float,
    behind: int | None = 0,
    state=PartitionState.OK,
    seconds: float | None = None,
):
    if seconds is None and behind is not None:
        seconds = 1.5 if behind else 0.0
    return stored_report(
        flow=flow,
        topic="orders",
        partition=partition,
        remote_topic="A.orders",
        replicated_offset=100,
        source_end_offset=None if behind is None else 100 + behind,
        records_behind=behind,
        seconds_behind=seconds,
        state=state,
        observed_at=timezone.now() - timedelta(seconds=age_s),
    )


def _summary(flow, budget: RpoBudget = DEFAULT_BUDGET) -> rollup.FlowSummary:
    flow = Flow.objects.get(pk=flow.pk)
    return rollup.summarize(
        flow, list(flow.task_statuses.all()), now=timezone.now(), stale_after=STALE_AFTER, budget=budget
    )


def _partition(flow, budget: RpoBudget = DEFAULT_BUDGET, *, partition: int = 0) -> rollup.PartitionLive:
    row = flow.partition_statuses.get(partition=partition)
    with override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER):
        return rollup.partitions_live(
            [row], flow=Flow.objects.get(pk=flow.pk), budget=budget, now=timezone.now()
        )[0]


@pytest.mark.parametrize(
    ("rows", "status", "health"),
    [
        ([], "UNKNOWN", "waiting"),
        ([(1, 0, "OK"), (2, 0, "OK")], "OK", "ok"),
        ([(1, 0, "OK"), (2, 7, "OK")], "OK", "ok"),  # 7 records in flight, 1.5 s: within the budget
        ([(1, 0, "OK"), (60, 0, "OK")], "STALE", "stale"),  # one silent partition: the flow is stale
        ([(60, 0, "OK"), (60, 0, "OK")], "STALE", "stale"),  # caught up when last seen: still not ok
        ([(60, 0, "ERR"), (1, 0, "OK")], "STALE", "stale"),  # an old error is history, not the state now
        ([(60, 0, "OK"), (1, 0, "ERR")], "ERR", "error"),  # a fresh error outranks staleness
    ],
)
def test_flow_health_is_its_worst_partition_and_stale_is_never_ok(flow, rows, status, health):
    for partition, (age, behind, state) in enumerate(rows):
        _row(flow, partition, age_s=age, behind=behind, state=state)
    summary = _summary(flow)
    assert (summary.status, summary.health) == (status, health)
    if rows:
        assert summary.age_s == pytest.approx(min(age for age, _, _ in rows), abs=1.0)


def test_a_paused_flow_with_old_figures_is_paused_not_ok(flow):
    _row(flow, 0, age_s=600)
    lifecycle.transition(flow=flow, name="pause")
    summary = _summary(flow)
    assert summary.health == "paused" and summary.stale and _partition(flow).state == "STALE"
    assert _partition(flow).health == "paused"  # not replicating by design: paused, not STALE


@pytest.mark.parametrize(
    ("behind", "seconds", "budget", "health"),
    [
        (3, 0.0, RpoBudget(60.0, None), "ok"),  # in flight: not behind
        (1, 180.0, RpoBudget(60.0, None), "lagging"),  # 3 min behind a 60 s budget, whatever Burrow says
        (5_000, 2.0, RpoBudget(60.0, 1_000), "lagging"),  # over the records budget
        (5_000, 2.0, RpoBudget(60.0, None), "ok"),  # no records budget: seconds decide
    ],
)
def test_health_judges_lag_against_the_flows_rpo_budget(flow, behind, seconds, budget, health):
    _row(flow, 0, age_s=1, behind=behind, seconds=seconds)
    summary = _summary(flow, budget)
    assert summary.status == "OK"  # Burrow's verdict: OK, yet the budget decides the colour
    assert (summary.health, _partition(flow, budget).health) == (health, health)


def test_every_page_and_the_api_colour_a_flow_by_its_budget(client_as, flow):
    _row(flow, 0, age_s=1, behind=1, seconds=180.0)
    _row(flow, 1, age_s=1, behind=7, seconds=0.0)
    viewer = client_as("viewer")
    assert viewer.get(f"/api/v1/flows/{flow.pk}/status/").json()["health"] == "lagging"
    answer = viewer.get(f"/api/v1/flows/{flow.pk}/status/").json()
    assert [p["health"] for p in answer["partitions"]["results"]] == ["lagging", "ok"]  # worst first
    assert viewer.get("/api/v1/status/").json()["flows"][0]["health"] == "lagging"
    page = viewer.get(reverse("web:flow-live", args=[flow.pk])).content.decode()
    assert '<span class="badge lagging" title="the worker\'s state: OK">behind</span>' in page
    assert '<span class="badge ok" title="the worker\'s state: OK">within budget</span>' in page
    assert 'class="edge lagging"' in viewer.get(reverse("web:overview-live")).content.decode()

    assurance.rpo_budget_set(actor=None, flow=flow, seconds_behind=600.0, records_behind=None)
    assert viewer.get("/api/v1/status/").json()["flows"][0]["health"] == "ok"
    assert 'class="edge ok"' in viewer.get(reverse("web:overview-live")).content.decode()
    flows = viewer.get(reverse("web:flows"), {"health": "ok"}).content.decode()
    assert reverse("web:flow", args=[flow.pk]) in flows


def test_a_stalled_partition_is_an_error_named_stall_and_explained_on_the_flow_page(client_as, flow):
    """The worker writes STALL for a partition its task's source passes over (replication.fetch_stall),
    without an error of its own: the page says what it means where an error would be."""
    _row(flow, 0, age_s=1, behind=0)
    _row(flow, 1, age_s=1, behind=40, state=PartitionState.STALL)
    stalled = _partition(flow, partition=1)
    assert (stalled.health, stalled.health_label, stalled.state) == ("error", "STALL", "STALL")
    assert _summary(flow).health == "error"
    viewer = client_as("viewer")
    page = viewer.get(reverse("web:flow-live", args=[flow.pk])).content.decode()
    assert page.count(escape(rollup.STALL_EXPLAINED)) == 1  # its row only
    only = viewer.get(f"/api/v1/flows/{flow.pk}/status/", {"state": "STALL"}).json()
    assert [p["partition"] for p in only["partitions"]["results"]] == [1]


@override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER)
def test_a_paused_flows_pages_say_paused_with_the_age_never_stale(client_as, flow):
    _row(flow, 0, age_s=600, behind=4)
    lifecycle.transition(flow=flow, name="pause")
    viewer = client_as("viewer")
    page = viewer.get(reverse("web:flow-live", args=[flow.pk])).content.decode()
    assert ">paused</span>" in page and "last seen 10 min" in page
    assert 'class="badge stale">stale' not in page and ">STALE<" not in page
    overview = viewer.get(reverse("web:overview-live")).content.decode()
    assert 'class="edge paused"' in overview
    assert ">paused</tspan>" in overview and ">4 behind, seen 10 min" in overview


def test_lag_roll_up_sums_records_and_takes_the_worst_seconds(flow):
    _row(flow, 0, age_s=1, behind=7)
    _row(flow, 1, age_s=1, behind=3)
    _row(flow, 2, age_s=1, behind=None)  # not measured yet: unknown, not zero
    summary = _summary(flow)
    # The unknown partition may be behind for any time: the flow's seconds behind is unknown, 1.5 s a bound.
    assert (summary.records_behind, summary.seconds_behind, summary.seconds_behind_at_least) == (
        10,
        None,
        1.5,
    )
    assert summary.health == "lagging"


@override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER)
def test_a_lag_not_known_yet_is_waiting_never_ok(client_as, flow):
    """Issue 36 item 3: on the flow page, the API and /metrics, until the partition's first fetch."""
    _row(flow, 0, age_s=1, behind=0)
    _row(flow, 1, age_s=1, behind=None)  # its task's first fetch has not answered
    summary = _summary(flow)
    assert (summary.health, summary.health_label) == ("waiting", rollup.WAITING_FOR_FETCH)
    waiting = _partition(flow, partition=1)
    assert (waiting.health, waiting.health_label, waiting.state) == (
        "waiting",
        rollup.WAITING_FOR_FETCH,
        "WAITING",
    )
    assert (_partition(flow, partition=0).health, _partition(flow, partition=0).state) == ("ok", "OK")

    viewer = client_as("viewer")
    body = viewer.get(f"/api/v1/flows/{flow.pk}/status/").json()
    assert body["health"] == "waiting"
    states = {p["partition"]: p["state"] for p in body["partitions"]["results"]}
    assert states == {0: "OK", 1: "WAITING"}
    only = viewer.get(f"/api/v1/flows/{flow.pk}/status/", {"state": "WAITING"}).json()
    assert [p["partition"] for p in only["partitions"]["results"]] == [1]
    page = viewer.get(reverse("web:flow-live", args=[flow.pk])).content.decode()
    assert rollup.WAITING_FOR_FETCH in page
    samples = [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(prometheus.exposition().decode())
        for sample in family.samples
        if sample.labels.get("flow") == flow.name
    ]
    assert [labels["health"] for name, labels, _ in samples if name == "mirrorplane_flow_health"] == [
        "waiting"
    ]
    shown = {
        labels["partition"]: labels["state"]
        for name, labels, _ in samples
        if name == "mirrorplane_partition_state"
    }
    assert shown == {"0": "OK", "1": "WAITING"}


@override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER)
def test_api_status_carries_observed_at_age_and_the_stale_state(client_as, flow):
    _row(flow, 0, age_s=1, behind=4)
    _row(flow, 1, age_s=45, behind=0)
    body = client_as("viewer").get(f"/api/v1/flows/{flow.pk}/status/").json()
    assert (body["health"], body["status"], body["stale"], body["stale_after_s"]) == (
        "stale",
        "STALE",
        True,
        STALE_AFTER,
    )
    assert body["records_behind"] == 4 and body["observed_at"] and body["age_s"] < STALE_AFTER
    silent, fresh = body["partitions"]["results"]  # worst first: STALE before OK
    assert (fresh["state"], fresh["reported_state"], fresh["stale"]) == ("OK", "OK", False)
    assert (silent["state"], silent["reported_state"], silent["stale"]) == ("STALE", "OK", True)
    assert silent["age_s"] == pytest.approx(45, abs=2) and silent["observed_at"]
    assert fresh["records_behind"] == 4 and fresh["seconds_behind"] == 1.5

    overview = client_as("viewer").get("/api/v1/status/").json()  # every flow, by the same rule
    assert overview["stale_after_s"] == STALE_AFTER and overview["replication"]["runnable"]
    (row,) = overview["flows"]
    assert {key: row[key] for key in ("id", "health", "status", "stale", "records_behind")} == {
        "id": flow.pk,
        "health": "stale",
        "status": "STALE",
        "stale": True,
        "records_behind": 4,
    }
    assert row["partition_count"] == 2 and row["observed_at"] == body["observed_at"]


@override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER)
def test_pages_show_the_age_of_stale_figures_and_a_banner_when_no_worker_reports(client_as, flow):
    Flow.objects.filter(pk=flow.pk).update(state_changed_at=timezone.now() - timedelta(minutes=5))
    _row(flow, 0, age_s=120)
    viewer = client_as("viewer")
    overview = viewer.get(reverse("web:overview-live")).content.decode()
    assert "No replication worker has reported for 2 min" in overview
    assert "<td>1</td>" in overview  # the flow table counts the partitions reported
    assert 'class="edge stale"' in overview and "last seen 2 min" in overview
    page = viewer.get(reverse("web:flow-live", args=[flow.pk])).content.decode()
    assert "No replication worker has reported" in page
    assert 'class="badge stale" title="the worker\'s state: STALE">stale</span>' in page
    assert "last seen 2 min" in page
    assert 'class="badge ok"' not in page

    _row(flow, 1, age_s=0)  # a worker reports again
    overview = viewer.get(reverse("web:overview-live")).content.decode()
    assert "has reported" not in overview


@override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER)
def test_the_banner_says_whether_workers_run_from_their_presence_in_redis(client_as, flow):
    key = presence.worker_key("replicator@test")
    viewer = client_as("viewer")
    presence.withdraw(key=key)
    if any(settings.REPLICATION_QUEUE in w.queues for w in presence.workers_seen()):
        pytest.skip("a replication worker of another test is still announced in this Redis database")
    banner = viewer.get(reverse("web:overview-live")).content.decode()
    assert "No replication worker is running" in banner  # a new flow, no worker: said at once
    presence.announce(key=key, name="replicator@test", queues=[settings.REPLICATION_QUEUE], pid=1)
    try:
        assert "workers-banner" not in viewer.get(reverse("web:overview-live")).content.decode()
        Flow.objects.filter(pk=flow.pk).update(state_changed_at=timezone.now() - timedelta(minutes=5))
        banner = viewer.get(reverse("web:overview-live")).content.decode()
        assert "1 replication worker running, but none replicates" in banner
        assert "No replication worker has reported yet" in banner
    finally:
        presence.withdraw(key=key)


@override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER)
def test_replication_activity_expects_reports_only_from_flows_that_should_replicate(flow):
    now = timezone.now()
    Flow.objects.filter(pk=flow.pk).update(state_changed_at=now - timedelta(minutes=5))
    never = activity.replication_activity(now=now)
    assert never.silent and never.alarming and never.last_report_at is None
    _row(flow, 0, age_s=2)
    assert not activity.replication_activity().silent
    lifecycle.transition(flow=flow, name="pause")
    Flow.objects.filter(pk=flow.pk).update(state_changed_at=now - timedelta(minutes=5))
    paused = activity.replication_activity(now=now + timedelta(minutes=10))
    assert not paused.silent and not paused.no_workers and not paused.alarming  # nothing should run


@override_settings(MIRRORPLANE_STALE_AFTER_S=STALE_AFTER)
def test_the_failover_plan_gets_the_last_known_lag_with_its_age_by_the_same_rule(flow):
    assert rollup.last_known_lag(flow=flow).note().startswith("no worker has measured")
    _row(flow, 0, age_s=2, behind=4)
    fresh = rollup.last_known_lag(flow=flow)
    assert (fresh.records_behind, fresh.stale) == ({("orders", 0): 4}, False)
    assert "last measurement, 2 s old" in fresh.note() and "STALE" not in fresh.note()
    _row(flow, 1, age_s=90, behind=None)  # never measured: not a known lag
    _row(flow, 2, age_s=60, behind=1)
    old = rollup.last_known_lag(flow=flow)
    assert old.records_behind == {("orders", 0): 4, ("orders", 2): 1} and old.stale
    assert "60 s old; STALE" in old.note()


def test_a_partition_behind_without_a_known_age_makes_the_flows_seconds_behind_unknown():
    from django.utils import timezone

    from controlplane.flows.models import Flow
    from controlplane.status.partition_writes import StatusFigures, task_status
    from controlplane.status.rollup import summarize

    now = timezone.now()
    caught_up = FlowPartitionStatus(
        topic="t", partition=0, records_behind=0, seconds_behind=0.0, observed_at=now
    )
    undated = FlowPartitionStatus(
        topic="t", partition=1, records_behind=900, seconds_behind=None, observed_at=now
    )

    def tasks(*rows):
        return [
            task_status([StatusFigures.of_row(row)], flow_id=0, task_index=i, task_error=None, at=now)
            for i, row in enumerate(rows)
        ]

    summary = summarize(
        Flow(state="active"), tasks(caught_up, undated), now=now, stale_after=10, budget=DEFAULT_BUDGET
    )
    assert summary.records_behind == 900 and summary.seconds_behind is None  # not "0 s behind"
    assert summary.seconds_behind_at_least == 0.0  # what is known: a lower bound
    assert summary.health == "lagging"  # behind for a time not known yet: not provably within budget
    caught_up_only = summarize(
        Flow(state="active"), tasks(caught_up), now=now, stale_after=10, budget=DEFAULT_BUDGET
    )
    assert caught_up_only.seconds_behind == 0.0


def test_records_of_aborted_transactions_are_their_own_flow_counter(flow):
    """Issue 36 item 5: counted apart from mirrorplane_records_replicated (tests/replication/
    test_transactions.py counts them in the engine)."""
    _row(flow, 0, age_s=1, behind=0)
    FlowPartitionStatus.objects.filter(flow=flow, partition=0).update(record_count=100, records_aborted=7)
    task_rollup_rebuild(flow_id=flow.pk, task_index=0)
    assert _summary(flow).records_aborted == 7
    samples = {
        (sample.name, sample.labels.get("flow")): sample.value
        for family in text_string_to_metric_families(prometheus.exposition().decode())
        for sample in family.samples
    }
    assert samples[("mirrorplane_flow_records_aborted_total", flow.name)] == 7
    assert samples[("mirrorplane_records_replicated_total", flow.name)] == 100
