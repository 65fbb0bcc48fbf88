"""Alerts on the database: evaluation opens and resolves instances, silences, budgets and channels in the
API (secrets write-only, field errors), and one delivery to a real local HTTP receiver."""

from __future__ import annotations

import datetime
import threading

import pytest
from django.core.cache import cache
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane import alerts, assurance, core
from controlplane import settings as PRODUCTION_SETTINGS
from controlplane.alerts import evaluation, notifications
from controlplane.alerts.models import AlertNotification, AlertRule, NotificationChannel, NotificationState
from controlplane.core import crypto
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditEvent
from controlplane.flows import services
from controlplane.metrics import prometheus
from controlplane.status.models import FlowSignals
from tests.receiver import Receiver, SmtpReceiver
from tests.status_reports import stored_report

TOKEN = "T000/B000/SECRET-token-xyz"


@pytest.fixture
def flow(two_clusters, admin_user):
    a, b = two_clusters
    flow = services.flow_create(
        actor=admin_user, source=a, target=b, enabled=True, emit_heartbeats_enabled=False
    )
    flow.state_changed_at = flow.created_at = timezone.now() - datetime.timedelta(hours=1)
    flow.save(update_fields=["state_changed_at", "created_at"])
    return flow


def report(flow, *, seconds_behind: float | None, records_behind: int | None = 10) -> None:
    stored_report(
        flow=flow,
        topic="t",
        partition=0,
        remote_topic="A.t",
        records_behind=records_behind,
        seconds_behind=seconds_behind,
        observed_at=timezone.now(),
    )


def test_a_flow_over_its_budget_fires_once_notifies_and_resolves_when_back(flow, admin_user, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    channel = notifications.channel_save(
        actor=admin_user, name="hook", kind="webhook", url="http://h.example/x"
    )
    assurance.rpo_budget_set(actor=admin_user, flow=flow, seconds_behind=30, records_behind=None)
    report(flow, seconds_behind=45)
    first = alerts.alerts_evaluate()
    assert [a.rule for a in first.fired] == [AlertRule.RPO_SECONDS]
    alert = first.fired[0]
    assert (alert.fired_figure, alert.threshold, alert.unit) == (45, 30, "seconds")
    assert alerts.alerts_evaluate().fired == []  # still firing: one instance, no second notification
    pending = AlertNotification.objects.filter(channel=channel, alert=alert)
    assert [(n.event, n.alert_id) for n in pending] == [("firing", alert.pk)]

    # Its lag not known for a while (the task's first fetch after a restart): still firing, not resolved.
    report(flow, seconds_behind=None, records_behind=None)
    unknown = alerts.alerts_evaluate()
    assert unknown.resolved == []
    # ...and failover readiness counts a lag not known as unknown, never as within the budget.
    assert [a.rule for a in unknown.fired] == [AlertRule.READINESS_LOW]
    report(flow, seconds_behind=0)
    resolved = {a.rule: a.pk for a in alerts.alerts_evaluate().resolved}
    assert resolved[AlertRule.RPO_SECONDS] == alert.pk and set(resolved) == {
        AlertRule.RPO_SECONDS,
        AlertRule.READINESS_LOW,
    }
    alert.refresh_from_db()
    assert alert.state == "resolved" and alert.resolved_at is not None
    assert sorted(pending.values_list("event", flat=True)) == ["firing", "resolved"]
    assert set(alerts.alert_list().values_list("state", flat=True)) == {"resolved"}


def test_stale_figures_keep_a_firing_budget_alert_until_a_fresh_report_within_it(flow, admin_user, settings):
    """The records budget over, then the flow's report late (its worker slow): the alert stays firing and
    nothing says resolved; a fresh report within the budget resolves it."""
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    assurance.rpo_budget_set(actor=admin_user, flow=flow, seconds_behind=3600, records_behind=200)
    report(flow, seconds_behind=5, records_behind=1920)
    alert = alerts.alerts_evaluate().fired[0]
    assert alert.rule == AlertRule.RPO_RECORDS
    stored_report(
        flow=flow,
        topic="t",
        partition=0,
        remote_topic="A.t",
        records_behind=0,
        seconds_behind=0.0,
        observed_at=timezone.now() - datetime.timedelta(seconds=120),
    )
    late = alerts.alerts_evaluate()
    assert AlertRule.RPO_RECORDS not in {a.rule for a in late.resolved}
    assert AlertRule.STALE_STATUS in {a.rule for a in late.fired}  # the rule that speaks for stale figures
    alert.refresh_from_db()
    assert alert.state == "firing"
    report(flow, seconds_behind=0, records_behind=0)
    assert alert.pk in {a.pk for a in alerts.alerts_evaluate().resolved}


def test_a_silence_marks_the_alert_and_sends_nothing_and_is_audited(flow, admin_user, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    notifications.channel_save(actor=admin_user, name="hook", kind="webhook", url="http://h.example/x")
    silence = alerts.silence_create(actor=admin_user, flow=flow, duration_s=600, reason="maintenance")
    report(flow, seconds_behind=500)
    fired = alerts.alerts_evaluate().fired
    assert fired and all(a.silenced for a in fired)
    assert not AlertNotification.objects.exists()
    audit = AuditEvent.objects.get(action="silence", object_type="silence")
    assert audit.object_id == str(silence.pk) and audit.after["reason"] == "maintenance"


def test_silencing_a_firing_alert_marks_it_at_once_and_ending_the_silence_notifies_it(
    flow, admin_user, client_as, settings
):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    notifications.channel_save(actor=admin_user, name="hook", kind="webhook", url="http://h.example/x")
    report(flow, seconds_behind=500)
    (alert,) = alerts.alerts_evaluate().fired
    assert not alert.silenced and list(alerts.firing_by_flow()) == [flow.pk]

    silence = alerts.silence_create(actor=admin_user, flow=flow, duration_s=600, reason="bulk load")
    alert.refresh_from_db()
    assert alert.silenced  # marked now, not only alerts that fire later
    assert alerts.firing_by_flow() == {}  # the overview and the flow list stop counting it
    (shown,) = client_as("viewer").get("/api/v1/alerts/", {"state": "firing"}).json()["results"]
    assert shown["silenced"] is True
    alerts.alerts_evaluate()  # still firing, still silenced: nothing more sent
    assert list(AlertNotification.objects.values_list("event", flat=True)) == ["firing"]

    alerts.silence_expire(actor=admin_user, silence=silence)
    alert.refresh_from_db()
    assert not alert.silenced and list(alerts.firing_by_flow()) == [flow.pk]
    # It fired unheard while silenced: its channels hear it now.
    assert list(AlertNotification.objects.values_list("event", flat=True)) == ["firing", "firing"]


def test_a_silence_that_expires_by_itself_unmarks_its_alert_at_the_next_evaluation(
    flow, admin_user, settings
):
    settings.MIRRORPLANE_STALE_AFTER_S = 600
    report(flow, seconds_behind=500)
    alerts.silence_create(actor=admin_user, flow=flow, duration_s=60)
    (alert,) = alerts.alerts_evaluate().fired
    assert alert.silenced
    alerts.alerts_evaluate(now=timezone.now() + datetime.timedelta(seconds=120))
    alert.refresh_from_db()
    assert alert.state == "firing" and not alert.silenced


def test_silence_input_errors_name_the_field(flow, client_as):
    operator = client_as("operator")
    assert client_as("viewer").post("/api/v1/alerts/silences/", {"duration_s": 60}).status_code == 403
    bad = operator.post("/api/v1/alerts/silences/", {"rule": "nope", "duration_s": -1}, format="json")
    assert bad.status_code == 400 and set(bad.json()) == {"rule", "duration_s"}
    ok = operator.post("/api/v1/alerts/silences/", {"flow": flow.pk, "duration_s": 60}, format="json")
    assert ok.status_code == 201 and ok.json()["active"] is True
    expired = operator.post(f"/api/v1/alerts/silences/{ok.json()['id']}/expire/")
    assert expired.status_code == 200 and expired.json()["active"] is False


def test_rpo_budget_api_admin_writes_viewer_reads_bad_values_are_field_errors(flow, client_as):
    url = f"/api/v1/flows/{flow.pk}/rpo-budget/"
    assert client_as("viewer").get(url).json() == {"seconds_behind": 60.0, "records_behind": None}
    assert client_as("operator").put(url, {"seconds_behind": 5}, format="json").status_code == 403
    bad = client_as("admin").put(url, {"seconds_behind": 0, "records_behind": -3}, format="json")
    assert bad.status_code == 400 and set(bad.json()) == {"seconds_behind", "records_behind"}
    assert assurance.rpo_budget_of(flow=flow) == assurance.DEFAULT_BUDGET  # unchanged
    ok = client_as("admin").put(url, {"seconds_behind": 5, "records_behind": 1000}, format="json")
    assert ok.json() == {"seconds_behind": 5.0, "records_behind": 1000}
    assert AuditEvent.objects.filter(object_type="rpo_budget", after__records_behind=1000).exists()


def test_channel_url_is_a_write_only_secret_and_bad_input_changes_nothing(client_as, db, caplog):
    admin = client_as("admin")
    created = admin.post(
        "/api/v1/notification-channels/",
        {"name": "slack", "kind": "slack", "url": f"https://hooks.example.com/services/{TOKEN}"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert "url" not in body and body["url_hint"] == "https://hooks.example.com/***"
    stored = NotificationChannel.objects.get()
    assert TOKEN not in stored.url_encrypted and notifications.channel_url(stored).endswith(TOKEN)
    assert TOKEN not in str(list(AuditEvent.objects.values("before", "after", "detail")))

    for change, field in (
        ({"url": "ftp://x/y"}, "url"),
        ({"url": "javascript:alert(1)"}, "url"),
        ({"kind": "pager"}, "kind"),
    ):
        bad = admin.patch(f"/api/v1/notification-channels/{stored.pk}/", change, format="json")
        assert bad.status_code == 400 and field in bad.json(), bad.json()
    stored.refresh_from_db()
    assert stored.kind == "slack" and notifications.channel_url(stored).endswith(TOKEN)
    assert client_as("viewer").post("/api/v1/notification-channels/", {"name": "x"}).status_code == 403
    assert TOKEN not in caplog.text


def test_delivery_to_a_real_receiver_carries_flow_figure_and_link_and_failures_hide_the_token(
    flow, admin_user, settings
):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    settings.MIRRORPLANE_BASE_URL = "https://mirrorplane.example"
    with Receiver() as ok, Receiver(status=500) as broken:
        good = notifications.channel_save(actor=admin_user, name="ok", kind="webhook", url=f"{ok.url}/hook")
        bad = notifications.channel_save(
            actor=admin_user, name="bad", kind="slack", url=f"{broken.url}/{TOKEN}"
        )
        report(flow, seconds_behind=120)
        alerts.alerts_evaluate()
        ids = notifications.notifications_to_dispatch()
        assert len(ids) == 2 and notifications.notifications_to_dispatch() == []  # handed over once
        for notification in AlertNotification.objects.filter(pk__in=ids):
            try:
                notifications.notification_deliver(notification_id=notification.pk)
            except notifications.DeliveryFailed:
                assert notification.channel_id == bad.pk
        [body] = ok.bodies("/hook")
        assert (
            body["flow"] == flow.name and body["state"] == "firing" and body["rule"] == "rpo_seconds_exceeded"
        )
        assert body["figure"] == 120 and body["threshold"] == 60 and body["observed_at"]
        assert body["link"] == f"https://mirrorplane.example/flows/{flow.pk}/"
        [slack] = broken.bodies()
        assert "text" in slack and "blocks" in slack and flow.name in slack["text"]
    bad.refresh_from_db()
    good.refresh_from_db()
    assert bad.failing and "answered HTTP 5xx" in bad.last_error and TOKEN not in bad.last_error
    assert not good.failing and good.last_success_at
    assert AlertNotification.objects.get(channel=good).state == NotificationState.SENT


def test_scrub_masks_the_url_path_in_error_text():
    url = f"https://hooks.example.com/services/{TOKEN}?key=abc"
    text = f"HTTPSConnectionPool: Max retries exceeded with url: /services/{TOKEN}?key=abc ({url})"
    assert TOKEN not in notifications.scrub(text, url) and "abc" not in notifications.scrub(text, url)
    assert notifications.retry_delay_s(0) < notifications.retry_delay_s(1) < notifications.retry_delay_s(2)


def test_email_channel_sends_through_djangos_smtp_settings_to_a_real_smtp_server(flow, admin_user, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    notifications.channel_save(actor=admin_user, name="mail", kind="email", email_to=["oncall@example.com"])
    with pytest.raises(ServiceValidationError) as bad:
        notifications.channel_save(actor=admin_user, name="mail2", kind="email", email_to=["not-an-address"])
    assert "email_to" in bad.value.errors
    report(flow, seconds_behind=99)
    alerts.alerts_evaluate()
    [notification_id] = notifications.notifications_to_dispatch()
    with SmtpReceiver() as smtp:
        settings.EMAIL_BACKEND = PRODUCTION_SETTINGS.EMAIL_BACKEND  # the relay under the outbound policy
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp.port
        # Issue 35: the relay is reached only where MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED allows (public
        # addresses by default): a relay on loopback is not contacted until it is listed.
        settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = []
        with pytest.raises(notifications.DeliveryFailed) as refused:
            notifications.notification_deliver(notification_id=notification_id)
        assert "not contacted" in str(refused.value) and "MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED" in str(
            refused.value
        )
        assert smtp.connections == 0 and smtp.messages == []
        settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = ["127.0.0.1"]
        notifications.notification_deliver(notification_id=notification_id)
    [(recipients, message)] = smtp.messages
    assert recipients == ["oncall@example.com"]
    assert flow.name in message and f"/flows/{flow.pk}/" in message and "rpo_seconds_exceeded" in message


def test_alert_page_lists_firing_first_with_failing_channels(flow, admin_user, settings, client):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    report(flow, seconds_behind=200)
    alerts.alerts_evaluate()
    NotificationChannel.objects.create(name="down", kind="webhook", failing=True, last_error="HTTP 500 boom")
    client.force_login(admin_user)
    page = client.get("/alerts/").content.decode()
    assert page.index("Firing (1)") < page.index("Resolved (history)")
    assert "failing" in page and "HTTP 500 boom" in page
    flows_page = client.get("/flows/").content.decode()
    assert "1 alert firing" in flows_page


def test_rotating_the_secrets_key_re_encrypts_channel_urls(admin_user, settings):
    channel = notifications.channel_save(
        actor=admin_user, name="slack", kind="slack", url=f"https://hooks.example.com/{TOKEN}"
    )
    new_key = crypto.generate_key()
    assert core.secrets_key_rotate(actor=admin_user, new_key=new_key) == {
        "clusters": 0,
        "notification channels": 1,
    }
    settings.MIRRORPLANE_SECRETS_KEYS = [new_key]  # the old key is gone
    channel.refresh_from_db()
    assert notifications.channel_url(channel) == f"https://hooks.example.com/{TOKEN}"


def test_a_channel_disabled_after_queueing_sends_nothing(flow, admin_user, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    with Receiver() as receiver:
        channel = notifications.channel_save(actor=admin_user, name="hook", kind="webhook", url=receiver.url)
        report(flow, seconds_behind=300)
        alerts.alerts_evaluate()
        [notification_id] = notifications.notifications_to_dispatch()
        notifications.channel_save(actor=admin_user, channel=channel, enabled=False)
        notifications.notification_deliver(notification_id=notification_id)
    assert receiver.received == []
    assert AlertNotification.objects.get(pk=notification_id).state == NotificationState.FAILED


@pytest.mark.django_db(transaction=True)
def test_two_evaluations_at_once_open_one_alert_not_an_integrity_error(flow, admin_user, settings):
    """Beat's evaluation and one run by hand overlapped in CI: both saw no firing alert and both opened one.
    The second now waits for the first, then finds its alert firing."""
    if connection.vendor != "postgresql":
        pytest.skip("the overlap needs two database connections at once (PostgreSQL)")
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    assurance.rpo_budget_set(actor=admin_user, flow=flow, seconds_behind=30, records_behind=None)
    report(flow, seconds_behind=45)
    second: dict = {}

    def evaluate_beside():
        try:
            second["fired"] = alerts.alerts_evaluate().fired
        except Exception as error:  # reported to the test, not raised in the thread
            second["error"] = error
        finally:
            connections.close_all()

    with transaction.atomic():  # the first evaluation's transaction stays open while the second starts
        assert [a.rule for a in alerts.alerts_evaluate().fired] == [AlertRule.RPO_SECONDS]
        beside = threading.Thread(target=evaluate_beside)
        beside.start()
        beside.join(timeout=1.0)
        assert beside.is_alive()  # waiting for the first to end, not racing it
    beside.join(timeout=30)
    assert "error" not in second, second.get("error")
    assert second["fired"] == []
    assert alerts.alert_list().filter(state="firing").count() == 1


def test_the_age_of_the_last_rule_evaluation_is_exported_for_a_dead_mans_switch(flow):
    cache.delete(alerts.EVALUATED_AT_KEY)
    never = prometheus.exposition().decode().splitlines()
    assert not [line for line in never if line.startswith("mirrorplane_alert_evaluation_age_seconds ")]
    alerts.alerts_evaluate(now=timezone.now() - datetime.timedelta(seconds=90))
    line = next(
        line
        for line in prometheus.exposition().decode().splitlines()
        if line.startswith("mirrorplane_alert_evaluation_age_seconds ")
    )
    assert 89 <= float(line.split()[1]) < 120  # 90 s ago: what MirrorplaneRulesNotEvaluated judges


def test_an_evaluation_issues_the_same_statements_for_more_flows_firing_alerts_and_leases(
    two_clusters, admin_user, settings
):
    """Beat's evaluation every 10 s: its statements are a fixed set (a loaded database answers each late,
    so their number is its time), none per flow, alert or lease, and no savepoint inside its transaction."""
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    a, b = two_clusters
    c = services.cluster_create(actor=admin_user, alias="C", bootstrap_servers="c.example:9092")

    def over_budget(source, target):
        flow = services.flow_create(
            actor=admin_user, source=source, target=target, enabled=True, emit_heartbeats_enabled=False
        )
        assurance.rpo_budget_set(actor=admin_user, flow=flow, seconds_behind=30, records_behind=None)
        report(flow, seconds_behind=45)
        return flow

    def statements(flows) -> list[str]:
        leases = {flow.pk: evaluation.TaskLeases(planned=2, leased=1) for flow in flows}
        alerts.alerts_evaluate(tasks=leases, replication_workers=1)  # new flows' first leases: rows made
        with CaptureQueriesContext(connection) as queries:
            alerts.alerts_evaluate(tasks=leases, replication_workers=1)
        return [query["sql"] for query in queries.captured_queries]

    flows = [over_budget(a, b)]
    one = statements(flows)
    flows += [over_budget(b, a), over_budget(a, c), over_budget(c, b)]  # one of them a reverse flow
    four = statements(flows)
    assert len(four) == len(one) <= 15, "\n".join(four)
    # one transaction (a savepoint inside the test's), none nested in it
    assert len([sql for sql in four if sql.startswith("SAVEPOINT")]) == 1
    assert not [sql for sql in four if '"controlplane_flowpartitionstatus"' in sql]  # nor a partition row
    assert alerts.alert_list().filter(state="firing").count() == len(flows)
    assert sorted(FlowSignals.objects.values_list("flow_id", "tasks_planned", "tasks_leased")) == sorted(
        (flow.pk, 2, 1) for flow in flows
    )
