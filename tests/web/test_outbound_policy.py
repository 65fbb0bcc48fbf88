"""Issue 35, the outbound findings, through gunicorn as the Dockerfile runs it: every URL the server fetches
for a user follows one policy (replication.outbound), and viewers read no credential and no outbound
request's outcome.

Listeners of the test's own stand in for hostile services: the web allows 127.0.0.1 (where they and the
real Apicurio registry listen) and `*.example`; another loopback address (127.0.0.3) is another machine's
service, which the server must never reach."""

from __future__ import annotations

import importlib
import json
import urllib.error
import urllib.request

import pytest
from django.apps import apps as django_apps

from controlplane import core
from controlplane.alerts import notifications
from controlplane.alerts.models import NotificationChannel
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditEvent
from controlplane.core.roles import Role
from controlplane.flows import engine, services
from controlplane.flows.models import Cluster
from harness.runtime import Gunicorn
from replication import outbound
from replication.kafka.clients import make_producer
from replication.schemas.rest import ConfluentRegistryClient, Schema
from replication.schemas.wire import MAGIC_BYTE
from tests.receiver import Listener
from tests.replication.test_source_task import create_topics
from tests.web.served import api, signed_in, web_env

ALLOWED = "127.0.0.1,*.example"
OTHER_SERVICE_HOST = "127.0.0.3"  # loopback, outside ALLOWED: "a loopback port of another service"
REGISTRY_PASSWORD = "registry-pass-5150"
HOSTILE_TEXT = "root:x:0:0:HOSTILE-BODY"


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        env = web_env(MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED=ALLOWED)
    server = Gunicorn(env=env, log=tmp_path_factory.mktemp("web") / "gunicorn.log").start()
    yield server
    server.kill()


@pytest.fixture
def tokens(transactional_db, settings) -> dict[str, str]:
    settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = ALLOWED.split(",")  # this process as the web's
    made = {}
    for role in ("admin", "operator", "viewer"):
        user, made[role] = core.user_create_with_role(username=role, role=Role[role.upper()])
        user.set_password("a-long-test-password-0123")
        user.save()
    return made


def _refused() -> int:
    return AuditEvent.objects.filter(outcome="refused").count()


def _registry_url(cluster: Cluster) -> str | None:
    cluster.refresh_from_db()
    return engine.cluster_to_config(cluster).schema_registry().get("url")


def _strimzi(url: str) -> str:
    return (
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata:\n  name: m\nspec:\n"
        "  connectCluster: B\n  clusters:\n  - alias: A\n    bootstrapServers: a.example:9092\n"
        f'    config:\n      schema.registry.url: "{url}"\n  - alias: B\n    bootstrapServers: b.example:9092\n'
        "  mirrors:\n  - sourceCluster: A\n    targetCluster: B\n"
    )


def test_registry_urls_outside_the_policy_are_a_400_naming_the_field_at_every_write_path(web, tokens):
    admin = api(web, tokens["admin"])
    stored = services.cluster_create(
        actor=None,
        alias="A",
        bootstrap_servers="a.example:9092",
        client_properties={"client": {"schema.registry.url": "http://registry.example:8081"}},
    )
    form = signed_in(web, "admin")
    with Listener(host=OTHER_SERVICE_HOST) as other_service:
        attacks = {
            "file:///etc/passwd": "is not http or https",
            "ftp://registry.example/": "is not http or https",
            "http://169.254.169.254/latest/meta-data/": "MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED",
            f"{other_service.url}/": "MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED",
            f"http://registry-user:{REGISTRY_PASSWORD}@registry.example:8081": "basic.auth.user.info",
        }
        for url, reason in attacks.items():
            before = _refused()
            answers = {
                "create": admin.post(
                    f"{web.url}/api/v1/clusters/",
                    json={
                        "alias": "X",
                        "bootstrap_servers": "x.example:9092",
                        "client_properties": {"client": {"schema.registry.url": url}},
                    },
                    timeout=20,
                ),
                "update": admin.patch(
                    f"{web.url}/api/v1/clusters/{stored.pk}/",
                    json={"client_properties": {"client": {"schema.registry.url": url}}},
                    timeout=20,
                ),
                "mm2 import": admin.post(
                    f"{web.url}/api/v1/mm2/import/",
                    json={
                        "text": f"clusters = A\nA.bootstrap.servers = a.example:9092\nA.schema.registry.url = {url}\n",
                        "dry_run": False,
                    },
                    timeout=20,
                ),
                "strimzi import": admin.post(
                    f"{web.url}/api/v1/mm2/import/",
                    json={"text": _strimzi(url), "dry_run": False},
                    timeout=20,
                ),
            }
            fields = {
                "create": "client_properties",
                "update": "client_properties",
                "mm2 import": "clusters.A.client_properties",
                "strimzi import": "clusters.A.client_properties",
            }
            for path, answer in answers.items():
                assert answer.status_code == 400, (url, path, answer.text)
                [message] = answer.json()[fields[path]]
                assert message.startswith("client.schema.registry.url: ") and reason in message, message
                assert REGISTRY_PASSWORD not in answer.text
            page = form.post(
                f"{web.url}/clusters/new/",
                data={
                    "alias": "W",
                    "bootstrap_servers": "w.example:9092",
                    "security_protocol": "PLAINTEXT",
                    "client_properties": f"schema.registry.url = {url}",
                    "csrfmiddlewaretoken": form.cookies["csrftoken"],
                },
                headers={"Referer": f"{web.url}/clusters/new/"},
                timeout=20,
            )
            assert (
                page.status_code == 200
                and "client.schema.registry.url: " in page.text
                and reason in page.text
            )
            assert _refused() == before + len(answers) + 1, url  # each write path audited its refusal
            assert sorted(Cluster.objects.values_list("alias", flat=True)) == ["A"]
            assert _registry_url(stored) == "http://registry.example:8081"
        assert other_service.heard == []
    audited = AuditEvent.objects.filter(outcome="refused").values_list("detail", flat=True)
    assert all(REGISTRY_PASSWORD not in detail for detail in audited)


def test_a_name_that_resolves_to_loopback_is_refused_unless_its_network_is_listed(tokens, settings):
    url = "http://localhost:8081"  # /etc/hosts: 127.0.0.1

    def create() -> Cluster:
        return services.cluster_create(
            actor=None,
            alias="A",
            bootstrap_servers="a.example:9092",
            client_properties={"client": {"schema.registry.url": url}},
        )

    # The default (any name, public addresses only), then the name listed but not its address.
    for allowed in ([], ["localhost"]):
        settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = allowed
        with pytest.raises(ServiceValidationError) as refused:
            create()
        [message] = refused.value.errors["client_properties"]
        assert "'localhost' resolves to 127.0.0.1, a loopback address" in message
    assert not Cluster.objects.exists() and _refused() == 2
    settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = ["localhost", "127.0.0.0/8"]
    assert _registry_url(create()) == url


def test_each_connection_checks_the_address_the_name_resolves_to_now(tokens, settings):
    """A stored URL whose name passes the name rules (the default list: any name) reaches nothing its
    address does not allow: the check runs when the socket connects, not only when the URL was stored."""
    with Listener() as receiver:
        channel = NotificationChannel.objects.create(
            name="hook",
            kind="webhook",
            url_encrypted=notifications.crypto.encrypt_json(
                f"{receiver.url.replace('127.0.0.1', 'localhost')}/h"
            ),
        )
        settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = []
        refused = notifications.channel_test(actor=None, channel=channel)
        with pytest.raises(notifications.DeliveryFailed, match="resolves to 127.0.0.1, a loopback address"):
            notifications.notification_deliver(notification_id=refused.pk)
        assert receiver.heard == []
        settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = ["localhost", "127.0.0.0/8"]
        delivered = notifications.channel_test(actor=None, channel=channel)
        assert notifications.notification_deliver(notification_id=delivered.pk)
        assert [heard.path for heard in receiver.heard] == ["/h"]


def _wire_record(cluster_a, topic: str, schema_id: int) -> None:
    create_topics(cluster_a, [topic], 1)
    producer = make_producer(cluster_a)
    producer.produce(topic, value=bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + b'{"id": 7}')
    assert producer.flush(30) == 0


@pytest.mark.kafka
def test_viewers_read_records_of_a_redirecting_failing_or_refused_registry_with_a_class_only(
    web, tokens, cluster_a, schema_registries, unique_name
):
    real = schema_registries["A"].url
    document = {"type": "object", "title": "Order", "properties": {"id": {"type": "integer"}}}
    schema = Schema(json.dumps(document), schema_type="JSON")
    schema_id = ConfluentRegistryClient(real).register(f"{unique_name}-value", schema)
    _wire_record(cluster_a, unique_name, schema_id)
    cluster = services.cluster_create(
        actor=None,
        alias="A",
        bootstrap_servers=cluster_a.bootstrap_servers,
        client_properties={"client": {"schema.registry.url": real}},
        secrets={"client": {"schema.registry.basic.auth.user.info": f"registry-user:{REGISTRY_PASSWORD}"}},
    )
    admin, viewer = api(web, tokens["admin"]), api(web, tokens["viewer"])
    records = f"{web.url}/api/v1/clusters/{cluster.pk}/topics/{unique_name}/records/?partition=0&offset=0"

    def read_with(url: str) -> str:
        changed = admin.patch(
            f"{web.url}/api/v1/clusters/{cluster.pk}/",
            json={"client_properties": {"client": {"schema.registry.url": url}}},
            timeout=20,
        )
        assert changed.status_code == 200, changed.text
        answer = viewer.get(records, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.text

    [decoded] = json.loads(read_with(real))["records"]
    assert decoded["value"]["format"] == "json-schema"  # the real registry, allowed, decodes
    with (
        Listener() as target,
        Listener(status=307, headers={"Location": f"{real}/schemas/ids/{schema_id}"}) as to_registry,
        Listener(status=302, headers={"Location": f"{target.url}/schemas/ids/{schema_id}"}) as to_target,
        Listener(
            status=500, body=json.dumps({"error_code": 50001, "message": HOSTILE_TEXT}).encode()
        ) as hostile,
        Listener(
            host=OTHER_SERVICE_HOST, body=json.dumps({"schema": HOSTILE_TEXT}).encode()
        ) as other_service,
    ):
        for redirector in (to_registry, to_target):
            [record] = json.loads(read_with(redirector.url))["records"]
            assert record["value"]["format"] != "json-schema"
            assert "answered with a redirect (HTTP 3xx), which is not followed" in record["value"]["note"]
            assert redirector.heard[0].headers["Authorization"].startswith("Basic ")  # its own origin only
        assert target.heard == []  # the redirect's target was never asked: no credentials sent there

        shown = read_with(hostile.url)
        assert "answered HTTP 5xx" in shown and HOSTILE_TEXT not in shown and len(hostile.heard) == 1

        # Stored before MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED left its host out: not fetched, never a 500.
        Cluster.objects.filter(pk=cluster.pk).update(
            client_properties={"client": {"schema.registry.url": other_service.url}}
        )
        for _ in range(2):  # a refusal is not a registry that did not answer: no breaker opens on it
            answer = viewer.get(records, timeout=30)
            assert answer.status_code == 200, answer.text
            [record] = answer.json()["records"]
            assert (
                "not contacted" in record["value"]["note"] and OTHER_SERVICE_HOST in record["value"]["note"]
            )
            assert "did not answer" not in record["value"]["note"]
            assert HOSTILE_TEXT not in answer.text and other_service.heard == []


def test_webhooks_follow_the_policy_and_viewers_read_delivered_or_failed_only(web, tokens):
    admin = api(web, tokens["admin"])
    with (
        Listener(host=OTHER_SERVICE_HOST) as other_service,
        Listener() as target,
        Listener(status=302, headers={"Location": f"{target.url}/hook"}) as redirector,
    ):
        for url, reason in (
            (f"{other_service.url}/hook", "MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED"),
            ("http://169.254.169.254/hook", "MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED"),
            ("file:///etc/passwd", "is not http or https"),
            ("https://user:pw@hooks.example/hook", "in the URL's path or query"),
        ):
            before = _refused()
            answer = admin.post(
                f"{web.url}/api/v1/notification-channels/",
                json={"name": "hook", "kind": "webhook", "url": url},
                timeout=20,
            )
            assert answer.status_code == 400 and reason in answer.json()["url"][0], answer.text
            assert _refused() == before + 1 and not NotificationChannel.objects.exists()

        created = admin.post(
            f"{web.url}/api/v1/notification-channels/",
            json={"name": "hook", "kind": "slack", "url": f"{redirector.url}/services/T0/B0/token"},
            timeout=20,
        )
        assert created.status_code == 201, created.text
        channel = NotificationChannel.objects.get()
        test = notifications.channel_test(actor=None, channel=channel)
        with pytest.raises(notifications.DeliveryFailed):
            notifications.notification_deliver(notification_id=test.pk)
        assert len(redirector.heard) == 1 and target.heard == []  # the redirect was not followed
        # A URL stored before the list changed: refused at delivery, nothing sent.
        NotificationChannel.objects.filter(pk=channel.pk).update(
            url_encrypted=notifications.crypto.encrypt_json(f"{other_service.url}/hook")
        )
        again = notifications.channel_test(actor=None, channel=channel)
        with pytest.raises(notifications.DeliveryFailed, match="not contacted"):
            notifications.notification_deliver(notification_id=again.pk)
        assert other_service.heard == []

    by_role = {
        role: api(web, tokens[role]).get(f"{web.url}/api/v1/notification-channels/", timeout=20).json()
        for role in ("viewer", "operator")
    }
    [seen], [detailed] = by_role["viewer"]["results"], by_role["operator"]["results"]
    assert seen["failing"] and seen["last_error"] == ""
    assert "not contacted" in detailed["last_error"]
    viewer_page = signed_in(web, "viewer").get(f"{web.url}/alerts/", timeout=20).text
    operator_page = signed_in(web, "operator").get(f"{web.url}/alerts/", timeout=20).text
    assert '<span class="badge error">failing</span>' in viewer_page and "not contacted" not in viewer_page
    assert "not contacted" in operator_page and OTHER_SERVICE_HOST in operator_page


def test_viewers_read_no_sasl_username_in_the_strimzi_export(web, tokens):
    services.cluster_create(
        actor=None,
        alias="A",
        bootstrap_servers="a.example:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        secrets={"client": {"sasl.username": "mm2-user-4711", "sasl.password": "pw-4711"}},
    )
    exports = {
        role: [
            api(web, tokens[role]).get(f"{web.url}/api/v1/mm2/export/?format=strimzi", timeout=20).text,
            signed_in(web, role).get(f"{web.url}/mm2/export/?format=strimzi", timeout=20).text,
        ]
        for role in ("viewer", "operator", "admin")
    }
    for text in exports["viewer"]:
        assert "mm2-user-4711" not in text and "username: '******'" in text, text
    for text in exports["operator"] + exports["admin"]:
        assert "username: mm2-user-4711" in text, text
    assert all("pw-4711" not in text for texts in exports.values() for text in texts)


def test_the_opener_fetches_http_and_https_only():
    allowlist = outbound.HostAllowlist.of(["127.0.0.0/8"])
    for url in ("file:///etc/passwd", "ftp://127.0.0.1/", "data:,hello"):
        with pytest.raises(outbound.OutboundRefused, match="is not http or https"):
            outbound.fetch(urllib.request.Request(url), allowlist=allowlist, timeout_s=1)
        with pytest.raises(urllib.error.URLError, match="unknown url type"):  # no handler, checked or not
            outbound.opener(allowlist).open(url, timeout=1)


def test_the_identity_provider_is_asked_under_the_policy_and_never_through_a_redirect(settings, client):
    settings.MIRRORPLANE_OIDC_ENABLED = True
    settings.MIRRORPLANE_OIDC_CLIENT_ID = "mirrorplane"
    settings.MIRRORPLANE_OIDC_CLIENT_SECRET = "sso-secret-8086"
    settings.MIRRORPLANE_OIDC_ROLE_MAP = ["*=viewer"]
    settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = ALLOWED.split(",")
    with (
        Listener(host=OTHER_SERVICE_HOST) as other_service,
        Listener() as target,
        Listener(
            status=302, headers={"Location": f"{target.url}/o/.well-known/openid-configuration"}
        ) as redirector,
    ):
        for issuer, says in (
            (f"{other_service.url}/o", "is not contacted"),
            (f"{redirector.url}/o", "answered with a redirect (HTTP 3xx), which is not followed"),
        ):
            settings.MIRRORPLANE_OIDC_ISSUER = issuer
            answer = client.get("/login/sso/")
            page = answer.content.decode()
            assert answer.status_code == 502 and says in page, page[:2000]
        assert other_service.heard == [] and target.heard == [] and len(redirector.heard) == 1


def test_a_registry_url_stored_with_credentials_gives_them_to_the_write_only_secret(transactional_db):
    """Migration 0026: URLs stored before credentials were refused there."""
    stored = f"http://registry-user:{REGISTRY_PASSWORD}@registry.example:8081/apis"
    cluster = Cluster.objects.create(
        alias="A",
        bootstrap_servers="a.example:9092",
        client_properties={"client": {"schema.registry.url": stored}},
    )
    AuditEvent.objects.create(
        actor_name="admin",
        action="create",
        object_type="cluster",
        after={"client_properties": {"client": {"schema.registry.url": stored}}},
    )
    migration = importlib.import_module("controlplane.migrations.0026_registry_url_credentials")
    migration.move_registry_credentials(django_apps, None)
    cluster.refresh_from_db()
    assert engine.cluster_to_config(cluster).schema_registry() == {
        "url": "http://registry.example:8081/apis",
        "basic.auth.user.info": f"registry-user:{REGISTRY_PASSWORD}",
    }
    assert REGISTRY_PASSWORD not in json.dumps(
        [cluster.client_properties, *AuditEvent.objects.values("after")]
    )
