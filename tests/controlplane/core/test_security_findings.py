"""Regressions of the security review (issue "Security"), each named after its finding and run through
gunicorn as the Dockerfile runs it (DEBUG off), with the web server's own secrets in its environment."""

from __future__ import annotations

import datetime
import io
import os
import secrets
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from confluent_kafka import KafkaError, KafkaException
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from controlplane import core
from controlplane.assurance.verification import verification_rows, verification_run_record
from controlplane.core.errors import ClusterUnavailable, ServiceValidationError
from controlplane.core.models import ApiToken, AuditEvent
from controlplane.core.roles import Role
from controlplane.flows import cluster_reads, engine, services
from controlplane.flows.models import Cluster, Flow
from controlplane.status.models import FlowEvent
from harness.runtime import Gunicorn, create_topic, database_url, produce, sign_in
from replication.kafka.browser import BrowseError
from replication.verification import MirroredRecord, Mismatch, OffsetRange, PartitionOutcome

REPO = Path(__file__).resolve().parents[3]
PASSWORD = "review-password-1"
# What the web server's environment holds that no import may hand out.
SERVER_SECRETS = {
    "SECRET_KEY": "server-secret-key-" + secrets.token_hex(16),
    "METRICS_BEARER_TOKEN": "scrape-token-" + secrets.token_hex(8),
    "UNLISTED_PASSWORD": "unlisted-" + secrets.token_hex(8),
}
# Variables the administrator allowed (MIRRORPLANE_IMPORT_ENV_ALLOWED = MP_IMPORT_*).
ALLOWED = {
    "MP_IMPORT_CLIENT_ID": "allowed-client-id-" + secrets.token_hex(6),
    "MP_IMPORT_PASSWORD": "allowed-password-" + secrets.token_hex(6),
}


@pytest.fixture(scope="module")
def gunicorn_web(django_db_setup, django_db_blocker, tmp_path_factory):
    """gunicorn with DEBUG off, the server's secrets and the allowed variables in its environment, on the
    test database: one for the module (its start-up is the slowest part of a test here)."""
    with django_db_blocker.unblock():
        env = {
            **os.environ,
            **SERVER_SECRETS,
            **ALLOWED,
            "DEBUG": "false",
            # The test process reads what gunicorn encrypts.
            "MIRRORPLANE_SECRETS_KEY": ",".join(settings.MIRRORPLANE_SECRETS_KEYS),
            "MIRRORPLANE_IMPORT_ENV_ALLOWED": "MP_IMPORT_*",
            "MIRRORPLANE_BROWSE_MASKED_TOPICS": MASKED_TOPICS,
            "MIRRORPLANE_CLUSTER_HOSTS_ALLOWED": "127.0.0.0/8,*.example,localhost",
            "CLUSTER_CHECK_RATE_PER_MINUTE": "3",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "PYTHONPATH": str(REPO),
        }
    server = Gunicorn(env=env, log=tmp_path_factory.mktemp("web") / "gunicorn.log").start()
    yield server
    server.kill()


@pytest.fixture
def web(transactional_db, gunicorn_web):
    """The module's gunicorn, and an admin, an operator and a viewer with their API tokens (this test's)."""
    gunicorn_web.tokens = {
        role: core.user_create_with_role(username=role, role=Role[role.upper()], password=PASSWORD)[1]
        for role in ("admin", "operator", "viewer")
    }
    return gunicorn_web


def _api(web, role: str, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"Token {web.tokens[role]}"}
    return requests.request(method, f"{web.url}/api/v1/{path}", headers=headers, timeout=20, **kwargs)


def _import(web, text: str, *, dry_run: bool, **extra) -> requests.Response:
    return _api(web, "admin", "post", "mm2/import/", json={"text": text, "dry_run": dry_run, **extra})


def _everything_a_viewer_reads(web) -> str:
    """Every page and API answer where a stored or audited value could show."""
    viewer = sign_in(web.url, username="viewer", password=PASSWORD)
    pages = [viewer.get(f"{web.url}/{path}", timeout=20).text for path in ("clusters/", "audit/", "flows/")]
    api = [
        _api(web, "viewer", "get", path).text
        for path in ("clusters/", "flows/", "audit/", "mm2/export/", "mm2/export/?format=strimzi")
    ]
    return "\n".join(pages + api)


MASKED_TOPICS = r"payments\..*,.*\.cards"
BASE = "clusters = A, B\nA.bootstrap.servers = a.example:9092\nB.bootstrap.servers = b.example:9092\n"
# Every kind of place a placeholder can stand in a file.
POSITIONS = [
    'A.sasl.jaas.config = x required password="${{env:{var}}}";\nA->B.enabled = true\n',
    "A.client.id = ${{env:{var}}}\nA->B.enabled = true\n",
    "A.producer.acks = ${{env:{var}}}\nA->B.enabled = true\n",
    "A.security.protocol = ${{env:{var}}}\nA->B.enabled = true\n",
    "sasl.password = ${{env:{var}}}\nA->B.enabled = true\n",
    "A->B.enabled = true\nA->B.topics = ${{env:{var}}}\n",
    "A->B.enabled = true\nA->B.producer.client.id = ${{env:{var}}}\n",
    "A->B.enabled = true\nreplication.factor = ${{env:{var}}}\n",
]


def test_finding_1_env_placeholders_never_read_the_web_servers_own_secrets(web):
    leaks = [*SERVER_SECRETS.values(), os.environ["PATH"]]
    for position in POSITIONS:
        for variable in [*SERVER_SECRETS, "PATH", "DATABASE_URL", "MIRRORPLANE_SECRETS_KEY"]:
            text = BASE + position.format(var=variable)
            for dry_run in (True, False):
                response = _import(web, text, dry_run=dry_run)
                assert response.status_code == 400, (text, response.text)
                assert not any(value in response.text for value in leaks), (text, response.text)
                assert f"environment variable {variable} is not set" in response.text or (
                    "placeholder is resolved only in a cluster's client properties" in response.text
                ), response.text
    assert not Cluster.objects.exists() and not Flow.objects.exists()
    # A default is the file's own value: the server's variable is still not read.
    with_default = BASE + "A.client.id = ${env:SECRET_KEY:-mirrorplane}\nA->B.enabled = true\n"
    assert _import(web, with_default, dry_run=False).status_code == 200
    assert engine.cluster_secrets(Cluster.objects.get(alias="A"))["client"] == {"client.id": "mirrorplane"}
    # The web import asks for an unlisted variable (write-only) rather than read it.
    admin = sign_in(web.url, username="admin", password=PASSWORD)
    asked = admin.post(
        f"{web.url}/mm2/import/",
        data={
            "text": BASE + "A.sasl.password = ${env:SECRET_KEY}\n",
            "dry_run": "1",
            "csrfmiddlewaretoken": admin.cookies["csrftoken"],
        },
        headers={"Referer": f"{web.url}/mm2/import/"},
        timeout=20,
    )
    assert asked.status_code == 200 and 'name="env_SECRET_KEY"' in asked.text
    assert SERVER_SECRETS["SECRET_KEY"] not in asked.text
    assert AuditEvent.objects.filter(action="import", outcome="refused").exists()
    shown = _everything_a_viewer_reads(web)
    assert not any(value in shown for value in leaks)


def test_finding_1_every_value_a_placeholder_gives_is_a_secret(web):
    text = BASE + (
        "A.client.id = ${env:MP_IMPORT_CLIENT_ID}\n"
        "A.consumer.client.rack = rack-${env:MP_IMPORT_CLIENT_ID}\n"
        'sasl.jaas.config = x required password="${env:MP_IMPORT_PASSWORD}";\n'
        "B.ssl.key.password = ${env:TYPED_KEY_PASSWORD}\n"
        "A->B.enabled = true\n"
    )
    typed = {"TYPED_KEY_PASSWORD": "typed-" + secrets.token_hex(6)}
    values = [*ALLOWED.values(), *typed.values()]
    dry = _import(web, text, dry_run=True, placeholder_values=typed)
    assert dry.status_code == 200, dry.text
    assert not any(value in dry.text for value in values)
    assert "secrets.client.client.id" in dry.text and "secrets.consumer.client.rack" in dry.text
    applied = _import(web, text, dry_run=False, placeholder_values=typed)
    assert applied.status_code == 200 and not any(value in applied.text for value in values)

    a, b = Cluster.objects.get(alias="A"), Cluster.objects.get(alias="B")
    assert a.client_properties.get("client", {}) == {} and a.client_properties.get("consumer", {}) == {}
    assert engine.cluster_secrets(a)["client"]["client.id"] == ALLOWED["MP_IMPORT_CLIENT_ID"]
    assert engine.cluster_secrets(b)["client"]["ssl.key.password"] == typed["TYPED_KEY_PASSWORD"]
    assert not any(value in a.secrets_encrypted + b.secrets_encrypted for value in values)
    shown = _everything_a_viewer_reads(web)
    for value in values:
        assert value not in shown, shown[max(0, shown.find(value) - 300) : shown.find(value) + 100]
    assert "A.client.id = ${env\\:A_CLIENT_ID}" in shown  # exported as a placeholder again

    # An invalid value a placeholder gave is quoted as the placeholder, never as the value.
    bad = BASE + "A.producer.acks = ${env:MP_IMPORT_PASSWORD}\nA->B.enabled = true\n"
    refused = _import(web, bad, dry_run=False)
    assert refused.status_code == 400 and "'${env:MP_IMPORT_PASSWORD}' is not a valid acks" in refused.text
    # An allowed variable is still refused where its value would be stored in clear.
    for clear in (
        "A.bootstrap.servers = ${env:MP_IMPORT_PASSWORD}\n",
        "A->B.topics = ${env:MP_IMPORT_PASSWORD}\n",
    ):
        refused = _import(web, BASE + "A->B.enabled = true\n" + clear, dry_run=False)
        assert refused.status_code == 400 and "stored and shown in clear" in refused.text, refused.text
    shown = _everything_a_viewer_reads(web)
    assert not any(value in shown for value in values)
    assert not any(
        value in f"{event.before} {event.after} {event.detail}"
        for event in AuditEvent.objects.all()
        for value in values
    )


def _mismatch(flow, *, topic: str, remote_topic: str, value: bytes, header: bytes) -> FlowEvent:
    """A data_mismatch as the verifier records it (its write path), holding both records."""
    source = MirroredRecord(offset=7, key=b"customer-17", value=value, headers=(("card", header),))
    target = MirroredRecord(offset=7, key=b"customer-17", value=value + b"!", headers=(("card", header),))
    verification_run_record(
        flow_id=flow.pk,
        stored=verification_rows(flow_id=flow.pk),
        outcomes=[
            PartitionOutcome(
                topic=topic,
                partition=0,
                remote_topic=remote_topic,
                status="mismatch",
                reason="content differs",
                recheck=OffsetRange(7, 8),
                mismatch=Mismatch("content differs", 7, 7, source, target),
            )
        ],
        partitions={(topic, 0)},
        at=timezone.now(),
    )
    return FlowEvent.objects.get(flow=flow, topic=topic)


def test_finding_2_verification_mismatches_mask_what_the_browser_masks(web):
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers="a.example:9092")
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers="b.example:9092")
    flow = services.flow_create(actor=None, source=a, target=b, enabled=True)
    secret_value, secret_header = b"pan=4111111111111111", b"cvv=737"
    # Masked by the source name, by the remote name only (the copy is the same data), and not masked.
    masked_source = _mismatch(
        flow, topic="payments.eu", remote_topic="A.payments.eu", value=secret_value, header=secret_header
    )
    masked_remote = _mismatch(
        flow, topic="eu.cards", remote_topic="A.eu.cards", value=secret_value, header=secret_header
    )
    clear = _mismatch(flow, topic="orders", remote_topic="A.orders", value=b"order-1", header=b"h-1")

    viewer = sign_in(web.url, username="viewer", password=PASSWORD)
    operator = sign_in(web.url, username="operator", password=PASSWORD)
    for event in (masked_source, masked_remote):
        page = viewer.get(f"{web.url}/flows/{flow.pk}/events/{event.pk}/", timeout=20).text
        assert "pan=4111" not in page and "cvv=737" not in page and "masked" in page
        assert "customer-17" in page  # keys are shown, as in the browser
        assert "pan=4111" in operator.get(f"{web.url}/flows/{flow.pk}/events/{event.pk}/", timeout=20).text
    assert "order-1" in viewer.get(f"{web.url}/flows/{flow.pk}/events/{clear.pk}/", timeout=20).text

    for role, sees in (("viewer", False), ("operator", True), ("admin", True)):
        status = _api(web, role, "get", f"flows/{flow.pk}/status/")
        assert status.status_code == 200
        assert ("pan=4111" in status.text, "cvv=737" in status.text) == (sees, sees), role
        events = {event["topic"]: event["detail"] for event in status.json()["events"]}
        assert events["orders"]["source"]["value"] == "order-1"
        if not sees:
            assert events["payments.eu"]["source"]["value"] == "masked"
            assert events["eu.cards"]["target"]["headers"] == [["card", "masked"]]
            assert events["eu.cards"]["source"]["key"] == "customer-17"
    flow_page = viewer.get(f"{web.url}/flows/{flow.pk}/", timeout=20).text
    assert "pan=4111" not in flow_page and "cvv=737" not in flow_page


def test_finding_3_a_viewers_bad_reads_never_open_a_healthy_clusters_breaker(web, cluster_a, unique_name):
    create_topic(cluster_a, unique_name, 2)
    produce(cluster_a, unique_name, 10, partitions=2)
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers=cluster_a.bootstrap_servers)
    records = f"clusters/{a.pk}/topics/{unique_name}/records/"
    bad_reads = [
        (records, {"time": "1960-01-01T00:00:00Z"}, "time"),
        (records, {"time": "1969-12-31T23:59:59.999Z"}, "time"),  # -1: Kafka's "latest"
        (records, {"time": "-5"}, "time"),
        (records, {"partition": 99}, "partition"),
        (records, {"offset": -1}, "offset"),
        (f"clusters/{a.pk}/topics/no-such-topic-{unique_name}/records/", {}, "topic"),
    ]
    for _ in range(3):  # more than MIRRORPLANE_CLUSTER_FAILURES_TO_FAULT rounds
        for path, params, field in bad_reads:
            response = _api(web, "viewer", "get", path, params=params)
            assert response.status_code == 400, (params, response.text)
            assert field in response.json(), (params, response.text)
        past_the_end = _api(web, "viewer", "get", records, params={"partition": 0, "offset": 10**15})
        assert past_the_end.status_code == 200 and past_the_end.json()["records"] == []
        assert "past the partition's end" in " ".join(past_the_end.json()["notes"])
    good = _api(web, "operator", "get", records, params={"partition": 0, "offset": 0})
    assert good.status_code == 200 and len(good.json()["records"]) == 5, good.text


def _broker_error(code: int):
    def read(config, timeout_s):
        raise BrowseError(f"cluster A: {KafkaError(code).str()}") from KafkaException(KafkaError(code))

    return read


@pytest.mark.django_db
def test_finding_3_only_cluster_failures_count_against_the_breaker(cluster_a):
    cluster_reads.reset_breakers()
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers=cluster_a.bootstrap_servers)
    answered = [
        KafkaError._INVALID_ARG,
        KafkaError.OFFSET_OUT_OF_RANGE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.GROUP_ID_NOT_FOUND,
        KafkaError.NON_EMPTY_GROUP,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.INVALID_REQUEST,
    ]
    for _ in range(3):
        for code in answered:
            with pytest.raises(ServiceValidationError) as refused:
                cluster_reads.cluster_read(a, _broker_error(code))
            assert "refused this request" in str(refused.value)
    assert cluster_reads.cluster_read(a, lambda config, timeout_s: "answered") == "answered"
    with pytest.raises(ClusterUnavailable):  # one read a cluster does not answer opens it
        cluster_reads.cluster_read(a, _broker_error(KafkaError._TRANSPORT))
    with pytest.raises(ClusterUnavailable, match="did not answer the last 1"):
        cluster_reads.cluster_read(a, lambda config, timeout_s: "not called")
    cluster_reads.reset_breakers()


def test_finding_5_a_source_that_times_out_costs_the_web_one_short_read_not_a_worker_per_request(web):
    """One sync gunicorn worker (the harness's, as `gunicorn controlplane.wsgi` without flags): a cluster
    that accepts TCP connections and never answers is asked once, the read bounded by
    MIRRORPLANE_WEB_READ_TIMEOUT_S (3 s); every other read of it, on every endpoint, is refused at once."""
    with socket.socket() as silent:  # the kernel completes handshakes; nothing ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        source = services.cluster_create(actor=None, alias="S", bootstrap_servers=address)
        target = services.cluster_create(actor=None, alias="B", bootstrap_servers="127.0.0.1:1")
        flow = services.flow_create(actor=None, source=source, target=target, enabled=True)
        started = time.monotonic()
        with ThreadPoolExecutor(6) as pool:
            answers = list(
                pool.map(lambda _: _api(web, "viewer", "get", f"flows/{flow.pk}/topics/"), range(6))
            )
        healthz = requests.get(f"{web.url}/healthz", timeout=30)
        elapsed = time.monotonic() - started
        assert [answer.status_code for answer in answers] == [502] * 6
        assert sum("did not answer the last 1 read(s)" in answer.text for answer in answers) == 5
        assert healthz.status_code in (200, 503) and elapsed < 3 + 3, elapsed  # one read, not six

        reads = [
            ("get", f"clusters/{source.pk}/topics/", {}),
            ("get", f"clusters/{source.pk}/topics/orders/records/", {}),
            ("get", f"clusters/{source.pk}/groups/", {}),
            ("get", f"clusters/{source.pk}/groups/billing/", {}),
            ("get", f"flows/{flow.pk}/copies/", {"params": {"topic": "orders"}}),
            (
                "post",
                f"flows/{flow.pk}/offsets/translate/",
                {
                    "json": {
                        "direction": "source_to_target",
                        "offsets": [{"topic": "orders", "partition": 0, "offset": 1}],
                    }
                },
            ),
        ]
        for method, path, extra in reads:
            asked = time.monotonic()
            response = _api(web, "viewer", method, path, **extra)
            assert time.monotonic() - asked < 1.5, (path, response.text)
            assert response.status_code == 502 and "cluster S" in response.text, (path, response.text)


def _post_form(session: requests.Session, url: str, data: dict) -> requests.Response:
    return session.post(
        url,
        data={**data, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": url},
        timeout=20,
    )


def test_finding_13_the_cluster_form_never_echoes_submitted_secrets(web):
    typed = {name: f"typed-{name}-{secrets.token_hex(4)}" for name in engine.SECRET_FIELDS}
    other = f'sasl.jaas.config=x required password="jaas-{secrets.token_hex(4)}";'
    values = [*typed.values(), other.split('"')[1]]
    admin = sign_in(web.url, username="admin", password=PASSWORD)
    existing = services.cluster_create(actor=None, alias="E", bootstrap_servers="e.example:9092")
    for url in (f"{web.url}/clusters/new/", f"{web.url}/clusters/{existing.pk}/edit/"):
        for invalid in (
            {"alias": "bad alias!"},
            {"bootstrap_servers": "no-port"},
            {"client_properties": "a=\\u12"},
        ):
            data = {"alias": "C", "bootstrap_servers": "c.example:9092", "security_protocol": "SASL_SSL"}
            data |= {**typed, "other_secrets": other, **invalid}
            page = _post_form(admin, url, data)
            assert page.status_code in (200, 400), page.status_code
            assert not any(value in page.text for value in values), (url, invalid)
        broken_secret = _post_form(
            admin, url, {"alias": "C", "bootstrap_servers": "c.example:9092", "other_secrets": "p=\\uS3cr"}
        )
        assert "S3cr" not in broken_secret.text and "not repeated" in broken_secret.text
    api = _api(
        web,
        "admin",
        "post",
        "clusters/",
        json={
            "alias": "bad alias!",
            "bootstrap_servers": "c.example:9092",
            "secret_properties": {"client": {"acks": "api-secret-9"}},
            "sasl_password": "api-secret-8",
        },
    )
    assert api.status_code == 400 and "api-secret" not in api.text
    assert not Cluster.objects.filter(alias="C").exists()


def test_finding_13_cluster_checks_reach_only_allowed_hosts_and_are_rate_limited(web):
    refused = _api(
        web, "admin", "post", "clusters/", json={"alias": "I", "bootstrap_servers": "10.9.8.7:9092"}
    )
    assert (
        refused.status_code == 400
        and "MIRRORPLANE_CLUSTER_HOSTS_ALLOWED" in refused.json()["bootstrap_servers"][0]
    )
    for host in ("metadata.internal:80", "[::1]:22", "192.168.1.1:6379"):
        answer = _api(web, "admin", "post", "clusters/", json={"alias": "I", "bootstrap_servers": host})
        assert answer.status_code == 400 and "bootstrap_servers" in answer.json(), host
    # A cluster stored before the list was set is not contacted either.
    stored = Cluster.objects.create(alias="old", bootstrap_servers="10.9.8.7:9092")
    asked = time.monotonic()
    check = _api(web, "operator", "post", f"clusters/{stored.pk}/check/")
    assert check.status_code == 400 and time.monotonic() - asked < 1 and "bootstrap_servers" in check.json()
    operator = sign_in(web.url, username="operator", password=PASSWORD)
    page = _post_form(operator, f"{web.url}/clusters/{stored.pk}/check/", {})
    assert page.status_code == 400 and "not checked" in page.text

    allowed = services.cluster_create(actor=None, alias="L", bootstrap_servers="127.0.0.1:1")
    answers = [_api(web, "operator", "post", f"clusters/{allowed.pk}/check/") for _ in range(4)]
    assert answers[0].status_code == 200 and answers[0].json()["failure"] == "refused"
    assert [a.status_code for a in answers[1:]] == [200, 200, 429]  # CLUSTER_CHECK_RATE_PER_MINUTE = 3
    assert int(answers[3].headers["Retry-After"]) >= 1


def test_finding_13_the_api_schema_and_docs_follow_their_setting(web, tmp_path):
    for path in ("/api/schema/", "/api/docs/"):
        assert requests.get(f"{web.url}{path}", timeout=20).status_code in (401, 403), path
        signed_in = requests.get(
            f"{web.url}{path}", headers={"Authorization": f"Token {web.tokens['viewer']}"}, timeout=20
        )
        assert signed_in.status_code == 200, path
    opened = Gunicorn(env={**web.env, "MIRRORPLANE_API_DOCS_OPEN": "true"}, log=tmp_path / "open.log").start()
    try:
        for path in ("/api/schema/", "/api/docs/"):
            assert requests.get(f"{opened.url}{path}", timeout=20).status_code == 200, path
    finally:
        opened.kill()


def test_finding_13_the_role_is_checked_before_the_body_and_its_refusal_audited(web):
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers="a.example:9092")
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers="b.example:9092")
    flow = services.flow_create(actor=None, source=a, target=b, enabled=True)
    bodies = [{}, {"groups": "not-a-list", "drain_timeout_s": "x"}, {"confirm": 7, "groups": [None]}]
    for kind, path in (
        ("failover", "failover"),
        ("failback", "failback"),
        ("drill", "drills"),
        ("cutover", "cutover"),
    ):
        for body in bodies:
            answer = _api(web, "viewer", "post", f"flows/{flow.pk}/{path}/", json=body)
            assert answer.status_code == 403 and "operator role" in answer.text, (kind, body, answer.text)
        assert AuditEvent.objects.filter(action=kind, outcome="refused", actor_name="viewer").count() == len(
            bodies
        )
    for method, path, body in (
        ("post", "clusters/", {"alias": 5}),
        ("patch", f"clusters/{a.pk}/", {"bootstrap_servers": ""}),
        ("delete", f"flows/{flow.pk}/", None),
        ("post", "mm2/import/", {"text": None}),
    ):
        before = AuditEvent.objects.filter(outcome="refused", actor_name="operator").count()
        answer = _api(web, "operator", method, path, json=body)
        assert answer.status_code == 403, (path, answer.text)
        assert AuditEvent.objects.filter(outcome="refused", actor_name="operator").count() == before + 1
    viewer = sign_in(web.url, username="viewer", password=PASSWORD)
    before = AuditEvent.objects.filter(action="failover", outcome="refused").count()
    page = _post_form(
        viewer, f"{web.url}/flows/{flow.pk}/failover/execute/", {"confirm": "A->B", "drain_timeout_s": "abc"}
    )
    assert "failover needs the operator role" in page.text
    assert AuditEvent.objects.filter(action="failover", outcome="refused").count() == before + 1
    form = _post_form(viewer, f"{web.url}/clusters/new/", {"alias": ""})
    assert form.status_code == 403
    assert AuditEvent.objects.filter(object_type="cluster", outcome="refused", actor_name="viewer").exists()


def test_finding_11_api_tokens_are_stored_hashed_shown_once_rotated_and_expire(web):
    old = web.tokens["viewer"]
    assert _api(web, "viewer", "get", "flows/").status_code == 200
    stored = ApiToken.objects.get(user__username="viewer")
    assert old not in f"{stored.digest} {stored.prefix}" and stored.prefix == old[:8]
    assert stored.expires_at is not None  # MIRRORPLANE_API_TOKEN_TTL_DAYS (90 by default)

    rotated = _api(web, "viewer", "post", "tokens/rotate/")
    assert rotated.status_code == 201, rotated.text
    new = rotated.json()["token"]
    assert new != old and rotated.json()["prefix"] == new[:8]
    assert _api(web, "viewer", "get", "flows/").status_code == 401  # the old key no longer works
    web.tokens["viewer"] = new
    assert _api(web, "viewer", "get", "flows/").status_code == 200
    shown = _everything_a_viewer_reads(web)
    assert new not in shown and old not in shown
    assert AuditEvent.objects.filter(action="rotate_api_token", object_repr="viewer").exists()
    assert not any(new in f"{e.before} {e.after} {e.detail}" for e in AuditEvent.objects.all())

    ApiToken.objects.filter(user__username="viewer").update(
        expires_at=timezone.now() - datetime.timedelta(seconds=1)
    )
    expired = _api(web, "viewer", "get", "flows/")
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]
    assert (
        _api(web, "viewer", "post", "tokens/rotate/").status_code == 401
    )  # an expired token rotates nothing

    out, err = io.StringIO(), io.StringIO()
    call_command("rotate_api_token", "viewer", "--expires-in-days", "1", stdout=out, stderr=err)
    web.tokens["viewer"] = out.getvalue().strip()
    assert _api(web, "viewer", "get", "flows/").status_code == 200 and "expires" in err.getvalue()
    with pytest.raises(CommandError, match="no user"):
        call_command("rotate_api_token", "nobody", stdout=io.StringIO())


def test_finding_11_a_user_demoted_below_admin_loses_the_admin_site(web):
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff and not admin.is_superuser
    session = sign_in(web.url, username="admin", password=PASSWORD)
    assert session.get(f"{web.url}/admin/", timeout=20).url.endswith("/admin/")
    # The admin role reads every model page (read-only), not only the index.
    for model in ("cluster", "flow", "auditevent"):
        page = session.get(f"{web.url}/admin/controlplane/{model}/", timeout=20)
        assert page.status_code == 200, (model, page.status_code)
    assert session.get(f"{web.url}/admin/controlplane/cluster/add/", timeout=20).status_code == 403
    core.user_set_role(user=admin, role=Role.OPERATOR)
    admin.refresh_from_db()
    assert not admin.is_staff and not admin.is_superuser
    demoted = sign_in(web.url, username="admin", password=PASSWORD).get(f"{web.url}/admin/", timeout=20)
    assert "/admin/login/" in demoted.url
    # Staff status left behind (a group changed in the admin site's user editor) opens nothing either.
    get_user_model().objects.filter(username="admin").update(is_staff=True)
    still = sign_in(web.url, username="admin", password=PASSWORD).get(f"{web.url}/admin/", timeout=20)
    assert "/admin/login/" in still.url
