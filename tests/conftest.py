"""Fixtures shared by the whole suite: two real Kafka clusters on loopback.

They are Apache Kafka 4.x single-node KRaft clusters (deploy/kafka/pom.xml, from Maven Central), the broker
our users run. MIRRORPLANE_TEST_KAFKA=embedded runs the suite on the demo's embedded broker instead; its
own smoke tests (tests/replication/test_embedded.py) run either way.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from django.conf import settings as settings_module

from harness.apicurio import ApicurioRegistry, apicurio_registries
from replication.config import ClusterConfig
from replication.kafka.apache import ApacheKafkaBroker, BrokerSecurity, apache_clusters, kafka_version
from replication.kafka.embedded import EMBEDDED_CONSUMER_PROPERTIES, EmbeddedBroker, embedded_clusters
from tests.lake import S3_ENVIRONMENT, moto_s3_server
from tests.scheduling import (
    SharedFixtureScheduling,
    check_heavy_files,
    check_shared_fixtures,
    longest_files_first,
    slowest_files,
)
from tests.tls import make_pki

# Every cached statement is also compiled by the ORM and compared, here and in the web and worker processes
# the tests start (controlplane/core/statements.py).
os.environ["MIRRORPLANE_STATEMENTS_CHECK"] = "true"
settings_module.MIRRORPLANE_STATEMENTS_CHECK = True
# The tests' own requests build every answer (a test changes rows in a transaction rolled back at its end, whose
# commit would start the shared answers' generation); tests/web/test_shared_answers.py and the
# web's processes (gunicorn, as shipped) share them.
settings_module.MIRRORPLANE_SHARED_ANSWER_S = 0
# Likewise a scrape in the tests' own process reads the rows its test just wrote, not what a worker rendered
# before (tests/controlplane/metrics/test_rendered_exposition.py turns it on; so does every gunicorn started).
settings_module.METRICS_RENDER_INTERVAL_S = 0
KAFKA_KIND = os.environ.get("MIRRORPLANE_TEST_KAFKA", "apache")
# The clusters' consumer properties: the embedded broker holds every fetch its full fetch.wait.max.ms.
EMBEDDED_CONSUMER = EMBEDDED_CONSUMER_PROPERTIES if KAFKA_KIND == "embedded" else {}
# Broker folders (server.log) of this run, kept for a failed test to be read: one folder per pytest
# process, so that a run never deletes the folders of another one still running beside it.
KAFKA_RUNS = Path(__file__).resolve().parents[1] / "var" / "test-kafka"
KAFKA_LOGS = KAFKA_RUNS / f"run-{os.getpid()}"


def pytest_report_header(config) -> str:
    if KAFKA_KIND == "embedded":
        return "kafka: embedded tansu broker (MIRRORPLANE_TEST_KAFKA=embedded)"
    return f"kafka: Apache Kafka {kafka_version()} (KRaft, single node per cluster); logs in {KAFKA_LOGS}"


def pytest_sessionstart(session) -> None:
    """Folders of earlier runs whose pytest process has ended are removed."""
    for folder in KAFKA_RUNS.glob("run-*"):
        pid = folder.name.removeprefix("run-")
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(session, config, items) -> None:
    """The longest units of work first (tests/scheduling.py); `make test` keeps this order under xdist
    (`--no-loadscope-reorder`)."""
    check_shared_fixtures(items)
    check_heavy_files(items)
    items[:] = longest_files_first(items)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` keeps the files of a costly session fixture on one worker (tests/scheduling.py)."""
    return SharedFixtureScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_terminal_summary(terminalreporter) -> None:
    """The slowest files of the run, each one's tests summed (under xdist, on the workers that ran them):
    the figures tests/scheduling.py's SLOW_FILES takes, and the floor a long file sets for its worker."""
    slowest = slowest_files(
        (report for reports in terminalreporter.stats.values() for report in reports), count=20
    )
    if slowest:
        terminalreporter.write_sep("=", f"slowest {len(slowest)} files (setup + call + teardown)")
        for file, seconds in slowest:
            terminalreporter.write_line(f"{seconds:7.2f}s {file}")


# Tests write records with fixed timestamps (1_700_000_000_000: November 2023); under the 7-day default
# the broker's retention check (every 5 minutes) deleted them mid-test once the session ran long enough
# (tests/replication/test_legacy_offset_syncs.py read a remote partition whose first records were gone).
# Topics that test retention set their own.
# The session's brokers idle beside every test of their worker: the controller's no-op record, which shows
# other nodes it is alive, every 5 s instead of 500 ms (a single-node cluster has no other node) cut an
# idle broker's CPU from 1.9-2.0% of a core to 1.3% (two brokers of each, side by side, 60 s, load 10).
TEST_BROKER_CONFIG = {"log.retention.ms": "-1", "metadata.max.idle.interval.ms": "5000"}


def ensure_heartbeats_topic(cluster: ClusterConfig) -> None:
    """Give `cluster` a `heartbeats` topic if it has none. MM2 replicates every heartbeats topic whatever a
    flow's filter, and the session's clusters get one as soon as any test emits heartbeats: a test that
    counts what a flow would mirror makes sure it is there, so its count does not depend on which tests
    ran before it (xdist's distribution, -k)."""
    from replication.connector import NewRemoteTopic
    from replication.kafka.admin import TopicAdmin

    (error,) = (
        TopicAdmin(cluster).create_topics([NewRemoteTopic("heartbeats", "heartbeats", 1, 1, {})]).values()
    )
    assert error is None or "already exists" in str(error), error


@pytest.fixture(scope="session")
def kafka_brokers() -> dict[str, ApacheKafkaBroker | EmbeddedBroker]:
    """Two clusters, `A` and `B`, for the whole session (tests use unique topic names)."""
    if KAFKA_KIND == "embedded":
        with embedded_clusters(["A", "B"]) as brokers:
            yield brokers
        return
    with apache_clusters(["A", "B"], workdir=KAFKA_LOGS, config=TEST_BROKER_CONFIG) as brokers:
        yield brokers
        kill_brokers(brokers.values())


def kill_brokers(brokers: Iterable[ApacheKafkaBroker | EmbeddedBroker]) -> None:
    """kill -9 the brokers whose data nobody reads again: a controlled shutdown keeps nothing, and with
    the 4,000 partitions test_verification_scale leaves it ran into STOP_GRACE_S (30 s), one broker after
    the other: the session's teardown took 68 s."""
    for broker in brokers:
        broker.stop(kill=True)


# The SCRAM-SHA-512 users of the secured clusters: the broker's super user and an application user.
SCRAM_USERS = {"admin": "admin-secret", "mirror": "mirror-secret"}


@dataclass(frozen=True)
class SecureClusters:
    """Two Apache Kafka clusters with SASL_SSL (SCRAM-SHA-512), a test CA and the StandardAuthorizer."""

    brokers: dict[str, ApacheKafkaBroker]
    ca_pem: str

    def config(self, alias: str, *, user: str = "admin", password: str | None = None) -> ClusterConfig:
        return ClusterConfig(
            alias=alias,
            bootstrap_servers=self.brokers[alias].bootstrap_servers,
            client={
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user,
                "sasl.password": SCRAM_USERS[user] if password is None else password,
                "ssl.ca.pem": self.ca_pem,
            },
        )


@pytest.fixture(scope="session")
def secure_clusters(tmp_path_factory) -> SecureClusters:
    """`A` and `B` secured, started on first use (Apache Kafka only: the embedded broker has no SASL)."""
    if KAFKA_KIND == "embedded":
        pytest.skip("SASL_SSL clusters need Apache Kafka (MIRRORPLANE_TEST_KAFKA=embedded)")
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    security = BrokerSecurity(
        scram_users=SCRAM_USERS, keystore_pem=pki.keystore_path, truststore_pem=pki.ca_path
    )
    with apache_clusters(
        ["A", "B"], workdir=KAFKA_LOGS / "secure", security=security, config=TEST_BROKER_CONFIG
    ) as brokers:
        yield SecureClusters(brokers=brokers, ca_pem=pki.ca_pem)
        kill_brokers(brokers.values())


@pytest.fixture
def start_broker(tmp_path):
    """start_broker(name, port=0) -> a broker of the suite's kind, of the test's own (stopped after it)."""
    started: list[ApacheKafkaBroker | EmbeddedBroker] = []

    def start(name: str, *, port: int = 0) -> ApacheKafkaBroker | EmbeddedBroker:
        if KAFKA_KIND == "embedded":
            broker = EmbeddedBroker(name=name, port=port)
        else:
            broker = ApacheKafkaBroker(name=name, port=port, workdir=tmp_path / f"kafka-{name}")
            broker.workdir.mkdir(parents=True, exist_ok=True)
        started.append(broker.start())
        return broker

    yield start
    kill_brokers(started)


@pytest.fixture(scope="session")
def cluster_a(kafka_brokers) -> ClusterConfig:
    return ClusterConfig(
        alias="A", bootstrap_servers=kafka_brokers["A"].bootstrap_servers, consumer=EMBEDDED_CONSUMER
    )


@pytest.fixture(scope="session")
def cluster_b(kafka_brokers) -> ClusterConfig:
    return ClusterConfig(
        alias="B", bootstrap_servers=kafka_brokers["B"].bootstrap_servers, consumer=EMBEDDED_CONSUMER
    )


@pytest.fixture
def memory_clusters(settings):
    """The control plane reaches in-memory clusters (MIRRORPLANE_CLUSTERS=memory, `replication.memory`), one
    per bootstrap address, empty at the start: the test seeds them (`.cluster("memory-a:9092")`). For tests
    of the control plane's rules; the ports' own tests (tests/replication/test_cluster_ports.py) hold the
    in-memory answers to Apache Kafka's."""
    from controlplane.flows import cluster_reads, clusters

    settings.MIRRORPLANE_CLUSTERS = "memory"
    clusters.MEMORY.clear()
    cluster_reads.reset_breakers()
    yield clusters.MEMORY
    clusters.MEMORY.clear()


@pytest.fixture(scope="session")
def schema_registries() -> dict[str, ApicurioRegistry]:
    """A real Confluent-compatible schema registry per cluster, `A` and `B` (Apicurio Registry from Maven
    Central, in memory), for the session: tests use their own subjects (unique topic names)."""
    with apicurio_registries(["A", "B"], workdir=KAFKA_LOGS / "schema-registry") as registries:
        yield registries


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, whose other connections are ended before it is dropped: a
    connection a live thread of the session or a process a test started still holds made PostgreSQL
    wait 5 s, then refuse to drop it (a worker's session teardown, and the database stayed)."""
    yield
    from django.db import connection

    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


@pytest.fixture(scope="session", autouse=True)
def _few_iterations_password_hasher():
    """Passwords hashed with tests/passwords.py's hasher in the test process, for the session."""
    from django.test.utils import override_settings

    with override_settings(
        PASSWORD_HASHERS=[
            "tests.passwords.FewIterationsPBKDF2PasswordHasher",
            "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        ]
    ):
        yield


@pytest.fixture(autouse=True)
def _kept_readers_closed():
    """The readers harness.runtime kept between a test's reads of remote topics are closed after it."""
    yield
    runtime = sys.modules.get("harness.runtime")
    if runtime is not None:
        runtime.close_kept_readers()


@pytest.fixture(autouse=True)
def _schema_registries_emptied_after(request):
    """A test that used the session's registries leaves them empty: tests use their own subjects, but a
    schema's references are subjects of no topic, which a flow's schema sync copies whatever its topics
    (tests/replication/test_schema_sync.py counted those of the tests that ran before it)."""
    yield
    if "schema_registries" in request.fixturenames:
        for registry in request.getfixturevalue("schema_registries").values():
            empty_registry(registry.url)


def empty_registry(url: str) -> None:
    """Every subject of the registry deleted for good, a referenced one once those naming it are gone."""
    subjects: list[str] = []
    for _ in range(5):
        subjects = requests.get(f"{url}/subjects", params={"deleted": "true"}, timeout=10).json()
        if not subjects:
            return
        for subject in subjects:
            path = f"{url}/subjects/{quote(subject, safe='')}"
            requests.delete(path, timeout=10)  # soft first, as the Confluent API asks
            requests.delete(path, params={"permanent": "true"}, timeout=10)
    raise AssertionError(f"schema registry {url} kept the subjects {subjects}")


@pytest.fixture
def unique_name(request) -> str:
    """A topic/group name no other test uses, so tests can share the session clusters."""
    stem = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:40]
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def users(db) -> dict:
    """A user per role, plus `norole`: authenticated but holding no role (web and dashboards tests)."""
    from controlplane import core
    from controlplane.core.roles import Role

    result = {
        role.group_name: core.user_create_with_role(username=role.group_name, role=role)[0] for role in Role
    }
    norole, _ = core.user_create_with_role(username="norole", role=Role.VIEWER)
    norole.groups.clear()
    result["norole"] = norole
    return result


@pytest.fixture
def client_as(users):
    """client_as("operator") -> a Django test client logged in as that role; "anonymous" is not logged in.

    tests/controlplane overrides it with its token-authenticated API client."""
    from django.test import Client

    def make(role: str) -> Client:
        client = Client()
        if role != "anonymous":
            client.force_login(users[role])
        return client

    return make


@pytest.fixture
def s3_server(tmp_path, monkeypatch) -> str:
    """An S3-compatible server (moto's) with a `metrics` bucket, its `host:port`; this process's AWS
    environment names its credentials, as a worker's would."""
    for name, value in S3_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    with moto_s3_server(tmp_path / "moto.log") as endpoint:
        yield endpoint


def web_reads_wait_for_a_loaded_machine(settings) -> None:
    """In-process views read Kafka with MIRRORPLANE_WEB_READ_TIMEOUT_S (3 s in production). On the 2-core CI
    machine, with brokers, Chromium and Spark beside them, a cold group read once took longer and the view
    answered 502 (tests/web/test_groups.py): the view tests (tests/web, tests/controlplane and the browser
    tests' in-process live server in tests/e2e, autouse there)
    are about what the views read, not about the bound, so they wait up to 10 s. The bound itself is tested
    through gunicorn with its production default (tests/controlplane/core/test_security_findings.py) and by
    tests that set their own."""
    settings.MIRRORPLANE_WEB_READ_TIMEOUT_S = max(settings.MIRRORPLANE_WEB_READ_TIMEOUT_S, 10.0)
