"""No web request waits on another system for long (issue 35, item 2), through gunicorn run with the
Dockerfile's flags: a schema registry of the test's own that answers in 1.5 s, and Kafka "clusters" that
accept TCP connections and never answer, stand in for the slow and the dead systems a viewer can make the
web read. Counted, never timed: requests reaching the registry, connections reaching the dead clusters,
answers saying the breaker skipped a cluster, /healthz answers while the viewers' reads are in flight."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import fastavro
import pytest
import requests
from django.conf import settings

from controlplane import core
from controlplane.browse.record_schemas import MAX_LOOKUPS_PER_PAGE, schema_cache
from controlplane.core.errors import ClusterUnavailable
from controlplane.core.roles import Role
from controlplane.flows import cluster_reads, services
from harness.runtime import (
    Gunicorn,
    create_topic,
    database_url,
    dockerfile_gunicorn_flags,
    wait_until,
)
from replication.config import ClusterConfig
from replication.kafka.browser import BrowseError, TopicBrowser
from replication.kafka.clients import make_producer

REPO = Path(__file__).resolve().parents[3]
RECORDS = 500
SCHEMA_IDS = (11, 12, 13)


def _avro_schema(schema_id: int) -> dict:
    return {"type": "record", "name": f"Order{schema_id}", "fields": [{"name": "id", "type": "long"}]}


def _wire(schema_id: int, value: int) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(_avro_schema(schema_id)), {"id": value})
    return b"\x00" + struct.pack(">I", schema_id) + body.getvalue()


class Registry:
    """A schema registry on loopback answering `GET /schemas/ids/<id>` after `delay_s`, counting requests."""

    def __init__(self, *, delay_s: float, known: tuple[int, ...]) -> None:
        self.requests: list[str] = []
        lock = threading.Lock()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    registry.requests.append(self.path)
                time.sleep(delay_s)
                found = re.fullmatch(r"/schemas/ids/(\d+)", self.path)
                if found and int(found[1]) in known:
                    status, body = 200, {"schema": json.dumps(_avro_schema(int(found[1])))}
                else:
                    status, body = 404, {"error_code": 40403, "message": "Schema not found"}
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the web gave up waiting (its deadline)
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SilentListener:
    """A broker or a registry that accepts TCP connections and never answers, counting the connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(connection)  # held open, never read nor answered

    def close(self) -> None:
        self.sock.close()
        for connection in self.connections:
            connection.close()


@contextmanager
def silent_listeners(count: int):
    clusters = [SilentListener() for _ in range(count)]
    try:
        yield clusters
    finally:
        for cluster in clusters:
            cluster.close()


@pytest.fixture(scope="module")
def dockerfile_web(django_db_setup, django_db_blocker, tmp_path_factory):
    """gunicorn with the Dockerfile's flags on the test database and the test's Redis (its breakers)."""
    with django_db_blocker.unblock():
        env = {
            **os.environ,
            "DEBUG": "false",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "MIRRORPLANE_SECRETS_KEY": ",".join(settings.MIRRORPLANE_SECRETS_KEYS),
            "PYTHONPATH": str(REPO),
        }
    server = Gunicorn(
        env=env, log=tmp_path_factory.mktemp("web") / "gunicorn.log", args=dockerfile_gunicorn_flags()
    ).start()
    yield server
    server.kill()


@pytest.fixture
def viewer(transactional_db):
    cluster_reads.reset_breakers()
    schema_cache.clear()
    token = core.user_create_with_role(username="viewer", role=Role.VIEWER)[1]
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    yield session
    cluster_reads.reset_breakers()


HEALTH_PROBES = 5


def reads_beside_healthz(web_url: str, count: int, read, in_flight) -> tuple[list, list, list[float]]:
    """`count` parallel `read(i)`s, and once `in_flight()` says they reached the slow system, HEALTH_PROBES
    /healthz requests one after the other: (the reads' answers, every answer in the order it arrived as
    ("read" | "healthz", status), the /healthz latencies measured for the report)."""
    arrivals: list[tuple[str, int]] = []
    latencies: list[float] = []

    def tracked(i: int) -> requests.Response:
        answer = read(i)
        arrivals.append(("read", answer.status_code))
        return answer

    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(tracked, i) for i in range(count)]
        wait_until(in_flight, timeout_s=30, what="the viewers' reads to reach the slow system")
        for _ in range(HEALTH_PROBES):
            asked = time.monotonic()
            arrivals.append(("healthz", requests.get(f"{web_url}/healthz", timeout=60).status_code))
            latencies.append(time.monotonic() - asked)
        answers = [future.result() for future in futures]
    return answers, arrivals, latencies


def healthz_answered_while_reads_waited(arrivals: list[tuple[str, int]]) -> int:
    """The /healthz answers (200) that arrived before any read that waited on the slow system (a 503 is
    refused at once: it did not wait)."""
    answered = 0
    for kind, status in arrivals:
        if kind == "read" and status != 503:
            break
        answered += kind == "healthz" and status == 200
    return answered


def _report(what: str, latencies: list[float]) -> None:
    print(
        f"{what}: /healthz slowest {max(latencies):.3f} s of {len(latencies)}, load {os.getloadavg()[0]:.1f}"
    )


def _produce(cluster_a, topic: str, values: list[bytes]) -> None:
    producer = make_producer(cluster_a)
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


def _registry_cluster(alias: str, cluster_a, registry: Registry):
    return services.cluster_create(
        actor=None,
        alias=alias,
        bootstrap_servers=cluster_a.bootstrap_servers,
        client_properties={"client": {"schema.registry.url": registry.url}},
    )


@pytest.mark.kafka
def test_a_slow_registry_costs_a_few_lookups_and_never_holds_the_web(
    dockerfile_web, viewer, cluster_a, unique_name
):
    """500 records written with 3 schemas, a registry answering in 1.5 s: a read asks the registry at most
    once per schema, answers at the request's deadline with the records past it shown as bytes (a note
    says why); parallel reads leave /healthz answering while they wait, and once every web process has the
    schemas, every record is decoded without asking the registry again."""
    registry = Registry(delay_s=1.5, known=SCHEMA_IDS)
    try:
        create_topic(cluster_a, unique_name, 1)
        _produce(cluster_a, unique_name, [_wire(SCHEMA_IDS[i % 3], i) for i in range(RECORDS)])
        cluster = _registry_cluster("R", cluster_a, registry)
        path = f"{dockerfile_web.url}/api/v1/clusters/{cluster.pk}/topics/{unique_name}/records/"
        params = {"partition": 0, "offset": 0, "max_records": RECORDS}

        def read(_=None):
            return viewer.get(path, params=params, timeout=60)

        alone = read()
        assert alone.status_code == 200 and len(alone.json()["records"]) == RECORDS, alone.text[:500]
        assert 1 <= len(registry.requests) <= len(SCHEMA_IDS), registry.requests
        assert any("records not decoded past this point" in note for note in alone.json()["notes"])
        cut = [r for r in alone.json()["records"] if "was not read from the registry" in r["value"]["note"]]
        assert cut, "the read did not reach its deadline: the registry was not slow enough to show it"

        asked = len(registry.requests)
        answers, arrivals, latencies = reads_beside_healthz(
            dockerfile_web.url, 6, read, lambda: len(registry.requests) > asked
        )
        _report("6 parallel reads of 500 records beside a registry answering in 1.5 s", latencies)
        assert [answer.status_code for answer in answers] == [200] * 6, answers[0].text[:500]
        assert healthz_answered_while_reads_waited(arrivals) == HEALTH_PROBES, arrivals

        rounds = 2
        while rounds < 12:  # until every process of the web has every schema
            rounds += 1
            answers = [read() for _ in range(6)]
            decoded = [sum(r["value"]["format"] == "avro" for r in a.json()["records"]) for a in answers]
            if decoded == [RECORDS] * 6:
                break
        asked = len(registry.requests)
        assert [read().status_code for _ in range(6)] == [200] * 6
        assert len(registry.requests) == asked  # decoded from the cache: the registry is not asked
        print(f"registry requests for {rounds} rounds of reads of {RECORDS} records: {asked}")
        # Each web process (the Dockerfile's --workers) reads each schema once; a read that its deadline
        # cut made one lookup more.
        assert asked <= 3 * len(SCHEMA_IDS) + 1 + 6 * (rounds - 1), registry.requests
    finally:
        registry.close()


@pytest.mark.kafka
def test_a_registry_that_never_answers_is_skipped_by_every_web_process(
    dockerfile_web, viewer, cluster_a, unique_name
):
    """A registry that accepts TCP and never answers: the first read waits for it once, within its deadline,
    and shows the records as bytes; from then on every web process shows them at once, saying why, and
    the registry gets no other connection."""
    with silent_listeners(1) as (silent,):
        create_topic(cluster_a, unique_name, 1)
        _produce(cluster_a, unique_name, [_wire(SCHEMA_IDS[i % 3], i) for i in range(20)])
        registry = services.cluster_create(
            actor=None,
            alias="Q",
            bootstrap_servers=cluster_a.bootstrap_servers,
            client_properties={"client": {"schema.registry.url": f"http://{silent.address}"}},
        )
        path = f"{dockerfile_web.url}/api/v1/clusters/{registry.pk}/topics/{unique_name}/records/"

        def read(_=None):
            return viewer.get(path, params={"partition": 0, "offset": 0, "max_records": 20}, timeout=60)

        first = read()
        assert first.status_code == 200 and len(first.json()["records"]) == 20, first.text[:500]
        assert len(silent.connections) == 1
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(read, range(6)))
        for answer in answers:
            assert answer.status_code == 200 and len(answer.json()["records"]) == 20
            assert any(
                "did not answer" in note and "asked again in" in note for note in answer.json()["notes"]
            )
            assert {record["value"]["format"] for record in answer.json()["records"]} <= {"hex", "text"}
        assert len(silent.connections) == 1  # skipped by every process of the web


@pytest.mark.kafka
def test_a_page_asks_the_registry_a_bounded_number_of_times(dockerfile_web, viewer, cluster_a, unique_name):
    """500 records naming 500 IDs the registry does not have: a page asks it MAX_LOOKUPS_PER_PAGE times and
    shows the rest as bytes, saying why."""
    registry = Registry(delay_s=0, known=())
    try:
        create_topic(cluster_a, unique_name, 1)
        _produce(cluster_a, unique_name, [_wire(1000 + i, i) for i in range(RECORDS)])
        cluster = _registry_cluster("U", cluster_a, registry)
        answer = viewer.get(
            f"{dockerfile_web.url}/api/v1/clusters/{cluster.pk}/topics/{unique_name}/records/",
            params={"partition": 0, "offset": 0, "max_records": RECORDS},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text[:500]
        assert len(registry.requests) == MAX_LOOKUPS_PER_PAGE, registry.requests
        assert any(f"{MAX_LOOKUPS_PER_PAGE} times" in note for note in answer.json()["notes"])
        notes = [record["value"]["note"] for record in answer.json()["records"]]
        assert sum("is not in this cluster's registry" in note for note in notes) == MAX_LOOKUPS_PER_PAGE
        assert (
            sum("was not read from the registry" in note for note in notes) == RECORDS - MAX_LOOKUPS_PER_PAGE
        )
    finally:
        registry.close()


def test_viewers_reading_clusters_that_never_answer_leave_the_web_answering(dockerfile_web, viewer):
    """Twelve parallel viewer reads of two clusters that accept TCP and never answer: each answers with the
    cluster's problem (never a worker timeout), /healthz answers while they wait, and once one read of a
    cluster timed out, every web process skips it: the next twelve reads make no connection at all."""
    with silent_listeners(2) as silent:
        clusters = [
            services.cluster_create(actor=None, alias=f"D{i}", bootstrap_servers=s.address)
            for i, s in enumerate(silent)
        ]

        def read(i):
            cluster = clusters[i % 2]
            return viewer.get(f"{dockerfile_web.url}/api/v1/clusters/{cluster.pk}/topics/", timeout=60)

        first, arrivals, latencies = reads_beside_healthz(
            dockerfile_web.url, 12, read, lambda: all(s.connections for s in silent)
        )
        _report("12 parallel reads of 2 clusters that never answer", latencies)
        assert {answer.status_code for answer in first} <= {502, 503, 504}, [a.text for a in first]
        assert all("cluster D" in answer.json()["detail"] for answer in first)
        assert healthz_answered_while_reads_waited(arrivals) == HEALTH_PROBES, arrivals
        connections = sum(len(s.connections) for s in silent)

        with ThreadPoolExecutor(12) as pool:
            second = list(pool.map(read, range(12)))
        assert [answer.status_code for answer in second] == [502] * 12
        skipped = [
            a for a in second if re.search(r"D\d did not answer the last \d+ read", a.json()["detail"])
        ]
        assert len(skipped) == 12, [a.json()["detail"] for a in second]
        assert sum(len(s.connections) for s in silent) == connections  # no process asked them again


def test_a_cluster_that_timed_out_in_one_process_is_skipped_by_another(dockerfile_web, viewer):
    """One read through gunicorn times out against a silent cluster; this test process (another web process
    as far as the breaker is concerned) then refuses to read it without calling the cluster."""
    with silent_listeners(1) as (silent,):
        cluster = services.cluster_create(actor=None, alias="S1", bootstrap_servers=silent.address)
        answer = viewer.get(f"{dockerfile_web.url}/api/v1/clusters/{cluster.pk}/topics/", timeout=60)
        assert answer.status_code == 502 and "cluster S1" in answer.json()["detail"], answer.text
        assert "did not answer the last" not in answer.json()["detail"]  # this one waited for it
        calls = []
        with pytest.raises(ClusterUnavailable, match="S1 did not answer the last 1 read"):
            cluster_reads.cluster_read(cluster, lambda config, timeout_s: calls.append(config))
        assert calls == []


@pytest.mark.django_db
def test_a_reads_calls_share_one_deadline_and_a_call_cut_short_opens_no_breaker():
    """A browser's calls share its time: against a cluster that never answers, the first call waits it
    out and the second gets none of it (cut short). A failure cut short says the request ran out of time,
    not that the cluster does not answer: it opens no breaker, a call that had its time does."""
    cluster_reads.reset_breakers()
    with silent_listeners(1) as (silent,):
        cluster = services.cluster_create(actor=None, alias="C1", bootstrap_servers=silent.address)
        config = ClusterConfig(alias="C1", bootstrap_servers=silent.address)
        browser = TopicBrowser(config, timeout_s=1.5)
        failures = []
        for _ in range(2):
            with pytest.raises(BrowseError) as failed:
                browser.topics()
            failures.append(failed.value.cut_short)
        assert failures == [False, True]

        def cut_short(config, timeout_s):
            raise failed.value

        for _ in range(3):
            with pytest.raises(ClusterUnavailable, match="C1"):
                cluster_reads.cluster_read(cluster, cut_short)
        calls = []
        assert (
            cluster_reads.cluster_read(cluster, lambda config, timeout_s: calls.append(1) or "read") == "read"
        )
        assert calls == [1]  # no breaker opened
        with pytest.raises(ClusterUnavailable):
            cluster_reads.cluster_read(
                cluster, lambda config, timeout_s: TopicBrowser(config, timeout_s=1.5).topics()
            )
        with pytest.raises(ClusterUnavailable, match="did not answer the last 1 read"):
            cluster_reads.cluster_read(cluster, lambda config, timeout_s: calls.append(2))
        assert calls == [1]
    cluster_reads.reset_breakers()


@pytest.mark.kafka
def test_a_passing_test_connection_closes_the_breaker_for_the_whole_web(
    dockerfile_web, viewer, cluster_a, unique_name
):
    """The breaker's message says to check the cluster with Test connection: a check that passes is the
    probe that closes it, for every web process, at once."""
    cluster = services.cluster_create(actor=None, alias="K", bootstrap_servers=cluster_a.bootstrap_servers)
    operator = core.user_create_with_role(username="operator", role=Role.OPERATOR)[1]

    def unanswered(config, timeout_s):
        raise BrowseError("cluster K: Local: Timed out")

    with pytest.raises(ClusterUnavailable):
        cluster_reads.cluster_read(cluster, unanswered)  # opens it, in Redis
    topics = f"{dockerfile_web.url}/api/v1/clusters/{cluster.pk}/topics/"
    refused = viewer.get(topics, timeout=60)
    assert refused.status_code == 502 and "K did not answer the last 1 read" in refused.json()["detail"]
    check = requests.post(
        f"{dockerfile_web.url}/api/v1/clusters/{cluster.pk}/check/",
        headers={"Authorization": f"Token {operator}"},
        timeout=60,
    )
    assert check.status_code == 200 and check.json()["ok"], check.text
    answered = [viewer.get(topics, timeout=60) for _ in range(6)]  # whichever process answers
    assert [answer.status_code for answer in answered] == [200] * 6, answered[0].text


def test_a_web_process_keeps_threads_for_everything_else(dockerfile_web, viewer, tmp_path):
    """One web process with the Dockerfile's threads and MIRRORPLANE_WEB_OUTBOUND_REQUESTS=2: of six
    parallel reads of a cluster that never answers, two wait for it and four are refused at once (503,
    saying why), so /healthz and the pages that read only the database always find a thread."""
    flags = list(dockerfile_gunicorn_flags())
    flags[flags.index("--workers") + 1] = "1"
    web = Gunicorn(
        env={**dockerfile_web.env, "MIRRORPLANE_WEB_OUTBOUND_REQUESTS": "2"},
        log=tmp_path / "gunicorn.log",
        args=tuple(flags),
    ).start()
    try:
        with silent_listeners(1) as (silent,):
            cluster = services.cluster_create(actor=None, alias="W", bootstrap_servers=silent.address)

            def read(_):
                return viewer.get(f"{web.url}/api/v1/clusters/{cluster.pk}/topics/", timeout=60)

            answers, arrivals, latencies = reads_beside_healthz(web.url, 6, read, lambda: silent.connections)
            _report("6 parallel reads of a silent cluster, one process, 2 outbound slots", latencies)
            statuses = sorted(answer.status_code for answer in answers)
            assert statuses == [502, 502, 503, 503, 503, 503], [a.text for a in answers]
            busy = [a.json()["detail"] for a in answers if a.status_code == 503]
            assert all("already waiting on other systems for 2 requests" in detail for detail in busy)
            assert healthz_answered_while_reads_waited(arrivals) == HEALTH_PROBES, arrivals
    finally:
        web.kill()
