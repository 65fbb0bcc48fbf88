"""Apache Kafka 4.x KRaft clusters on loopback, for the tests, the benchmarks and
`make demo KAFKA=apache`.

The broker's jars come from Maven Central through `deploy/kafka/pom.xml` (fetched once into
`var/kafka/<version>/libs` by `replication.maven`). Each cluster is one JVM that is both
controller and broker, with `nodes` > 1 broker-only JVMs joining its quorum (a large bench's partitions
spread over several brokers, each holding fewer open files), each node formatted once in its own folder,
started as a child that dies with its parent,
ready once it answers a metadata request, stopped by SIGTERM (a controlled shutdown). Its folder keeps
`server.log` after a stop, so a failed test can show what the broker said; a restart keeps the data, as a
real broker's does.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from replication.kafka.processes import die_with_parent, free_port, stop_child
from replication.maven import maven_libs, pom_property

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
POM = PROJECT_ROOT / "deploy" / "kafka" / "pom.xml"
STOP_GRACE_S = 30.0
# A single-node cluster's own topics: replication factor 1, and fewer partitions than a production
# default of 50 so that the first consumer group or transaction does not wait for 50 leaders.
BROKER_DEFAULTS: dict[str, str] = {
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # The cleaner looks for logs to compact every second (default 15 s), so that what compaction does to
    # the internal topics shows within a test's time; it only cleans what is due either way.
    "log.cleaner.backoff.ms": "1000",
}
# The collector Apache Kafka's scripts choose (kafka-run-class.sh). As there, KAFKA_JVM_PERFORMANCE_OPTS,
# when set, replaces it (and any other flag of its own): the suite runs its brokers on the serial
# collector (tests/environment.py).
GC_OPTIONS = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
JVM_OPTIONS = [
    "-Xms256m",
    "-Xmx1g",
    *GC_OPTIONS,
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]
LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = INFO
"""


class ApacheKafkaError(RuntimeError):
    pass


@dataclass(frozen=True)
class BrokerSecurity:
    """A cluster whose clients authenticate with SCRAM-SHA-512 (SASL_PLAINTEXT, or SASL_SSL when a PEM
    keystore is given) and, with `authorizer`, Kafka's StandardAuthorizer (ACLs enforced; `admin` is a
    super user, as the broker itself is on its controller listener)."""

    scram_users: Mapping[str, str]
    admin: str = "admin"
    keystore_pem: Path | None = None  # the broker's private key (PKCS#8) and certificate chain
    truststore_pem: Path | None = None  # the CA the broker trusts when it connects to itself over TLS
    authorizer: bool = True

    @property
    def protocol(self) -> str:
        return "SASL_SSL" if self.keystore_pem else "SASL_PLAINTEXT"

    def broker_properties(self) -> dict[str, str]:
        listener = self.protocol.lower()
        password = self.scram_users[self.admin]
        properties = {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            f"listener.name.{listener}.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{self.admin}" password="{password}";'
            ),
        }
        if self.keystore_pem:
            properties |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore_pem)}
        if self.truststore_pem:
            properties |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.truststore_pem)}
        if self.authorizer:
            properties |= {
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                # The node talks to its own controller over the PLAINTEXT controller listener.
                "super.users": f"User:{self.admin};User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            }
        return properties

    def format_arguments(self) -> list[str]:
        return [
            argument
            for user, password in self.scram_users.items()
            for argument in ("--add-scram", f'SCRAM-SHA-512=[name="{user}",password="{password}"]')
        ]


def kafka_version() -> str:
    """The Apache Kafka version deploy/kafka/pom.xml names (its one home)."""
    return pom_property(POM, "kafka.version")


def kafka_libs() -> Path:
    """The folder of the broker's jars, fetched from Maven Central on first use.

    MIRRORPLANE_KAFKA_LIBS points at another folder of jars (an unpacked Apache Kafka's libs/, say)."""
    override = os.environ.get("MIRRORPLANE_KAFKA_LIBS")
    if override:
        return Path(override)
    version = kafka_version()
    return maven_libs(POM, PROJECT_ROOT / "var" / "kafka" / version / "libs", what=f"Apache Kafka {version}")


def class_data_archive() -> Path:
    """Where `make kafka` keeps the broker's class-data archive (`build_class_data_archive`), named for
    the jars' folder: the JVM checks the class path an archive was written with and silently maps none
    when it differs, so a `var/` copied to another checkout (an A/B worktree) or a moved one gets an
    archive of its own from the next `make kafka` instead of brokers that start a third slower unseen."""
    libs = kafka_libs()
    digest = hashlib.sha256(str(libs.resolve()).encode()).hexdigest()[:12]
    return libs.parent / f"broker-classes-{digest}.jsa"


def jvm_flags(options: list[str]) -> list[str]:
    """The JVM flags a broker (or its format tool) runs with: `options`, the collector replaced by
    KAFKA_JVM_PERFORMANCE_OPTS when set (as Kafka's scripts take it), and the class-data archive when there
    is one: the JVM maps the classes a broker loads at start instead of reading and verifying them again
    (measured, C1 and the serial collector: start 2.3 -> 1.5 CPU-s, the format tool 0.9 -> 0.55). An
    archive the jars no longer match is ignored by the JVM, with a warning in the broker's log."""
    performance = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS")
    flags = list(options)
    if performance:
        flags = [flag for flag in flags if flag not in GC_OPTIONS]
        flags += shlex.split(performance)
    archive = class_data_archive()
    if archive.exists() and not any(flag.startswith("-XX:ArchiveClassesAtExit") for flag in flags):
        flags.append(f"-XX:SharedArchiveFile={archive}")
    return flags


def build_class_data_archive() -> Path:
    """Start a broker once and stop it, the JVM writing the classes it loaded to `class_data_archive` as
    it exits (a dynamic CDS archive, JDK 13+); a second call keeps the first archive."""
    archive = class_data_archive()
    if archive.exists():
        return archive
    written = archive.with_suffix(f".{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(prefix="kafka-classes-") as workdir:
        broker = ApacheKafkaBroker(
            name="classes",
            workdir=Path(workdir),
            jvm_options=[*JVM_OPTIONS, f"-XX:ArchiveClassesAtExit={written}"],
        )
        broker.start()
        broker.stop()
        if not written.exists():
            output = Path(broker.log_path).read_text(errors="replace")[-2000:]
            raise ApacheKafkaError(f"the broker wrote no class-data archive: {output}")
    os.replace(written, archive)
    return archive


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as `kafka-storage random-uuid`)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class ApacheKafkaBroker:
    """One KRaft node (controller and broker) and, with `nodes` > 1, the broker-only nodes 2..`nodes`
    of the same cluster, which it starts, stops and deletes with itself; `bootstrap_servers` (every node's
    address) is valid once `start()` returns.

    `config` adds or overrides broker properties (on every node)."""

    name: str
    port: int = 0
    config: Mapping[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    jvm_options: list[str] = field(default_factory=lambda: list(JVM_OPTIONS))
    security: BrokerSecurity | None = None
    host: str = "127.0.0.1"  # the address it listens on and advertises
    netns: str | None = None  # a network namespace to run the JVM in (`ip netns exec`), for partitions
    controller_port: int = 0
    cluster_id: str = field(default_factory=random_cluster_id)
    nodes: int = 1
    node_id: int = 1
    joins: ApacheKafkaBroker | None = field(
        default=None, repr=False, compare=False
    )  # a broker-only node's controller
    process: subprocess.Popen | None = field(default=None, repr=False)
    followers: list[ApacheKafkaBroker] = field(default_factory=list, repr=False, compare=False)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{node.host}:{node.port}" for node in (self, *self.followers))

    @property
    def log_path(self) -> str:
        return str(self._workdir / "server.log")

    @property
    def data_dir(self) -> Path:
        return self._workdir / "data"

    @property
    def _workdir(self) -> Path:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"apache-kafka-{self.name}-"))
        return self.workdir

    def server_properties(self) -> dict[str, str]:
        self.port = self.port or free_port()
        protocol = self.security.protocol if self.security else "PLAINTEXT"
        listeners = f"{protocol}://{self.host}:{self.port}"
        if self.joins is None:
            self.controller_port = self.controller_port or free_port()
            controller = self
            roles, listeners = (
                "broker,controller",
                f"{listeners},CONTROLLER://{self.host}:{self.controller_port}",
            )
        else:
            controller, roles = self.joins, "broker"
        properties = {
            "process.roles": roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{controller.node_id}@{controller.host}:{controller.controller_port}",
            "listeners": listeners,
            "advertised.listeners": f"{protocol}://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": protocol,
            "listener.security.protocol.map": f"{protocol}:{protocol},CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            **BROKER_DEFAULTS,
            **(self.security.broker_properties() if self.security else {}),
        }
        properties.update(self.config)
        return properties

    def _java(self, main_class: str, *arguments: str) -> list[str]:
        java = shutil.which("java") or "java"
        return [
            java,
            *jvm_flags(self.jvm_options),
            f"-Dlog4j2.configurationFile={self._workdir / 'log4j2.properties'}",
            "-cp",
            str(kafka_libs() / "*"),
            main_class,
            *arguments,
        ]

    def _prepare(self) -> Path:
        workdir = self._workdir
        (workdir / "log4j2.properties").write_text(LOG4J2)
        properties_path = workdir / "server.properties"
        properties_path.write_text(
            "".join(f"{key}={value}\n" for key, value in self.server_properties().items())
        )
        if not (self.data_dir / "meta.properties").exists():
            result = subprocess.run(
                self._java(
                    "kafka.tools.StorageTool",
                    "format",
                    f"--cluster-id={self.cluster_id}",  # an id may start with "-"
                    "--config",
                    str(properties_path),
                    "--ignore-formatted",
                    *(self.security.format_arguments() if self.security else []),
                ),
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise ApacheKafkaError(
                    f"formatting Apache Kafka {self.name} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}"
                )
        return properties_path

    def launch(self) -> ApacheKafkaBroker:
        """Start the JVMs without waiting for them (`wait_ready` does): two clusters boot side by side."""
        if self.process is not None:
            return self
        self._launch()
        if not self.followers:
            self.followers = [
                ApacheKafkaBroker(
                    name=f"{self.name}-{node_id}",
                    workdir=self._workdir / f"node-{node_id}",
                    config=self.config,
                    jvm_options=self.jvm_options,
                    security=self.security,
                    host=self.host,
                    netns=self.netns,
                    cluster_id=self.cluster_id,
                    node_id=node_id,
                    joins=self,
                )
                for node_id in range(2, self.nodes + 1)
            ]
        for follower in self.followers:
            follower._workdir.mkdir(parents=True, exist_ok=True)
            follower._launch()
        return self

    def _launch(self) -> None:
        properties_path = self._prepare()
        with open(self.log_path, "ab") as log_file:
            prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
            self.process = subprocess.Popen(
                [*prefix, *self._java("kafka.Kafka", str(properties_path))],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
                # Its own session: a terminal's Ctrl-C reaches the process that started it, which stops
                # the clients still writing to it first (the broker dies with that process in any case).
                start_new_session=True,
            )
        _RUNNING.add(self)

    def start(self, *, ready_timeout_s: float = 90.0) -> ApacheKafkaBroker:
        self.launch()
        try:
            self.wait_ready(ready_timeout_s)
            self.wait_coordinators()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        """Until every node answers as a broker of the cluster (registered with its controller)."""
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            for node in (self, *self.followers):
                if node.process is None or node.process.poll() is not None:
                    raise ApacheKafkaError(
                        f"Apache Kafka {node.name} exited with {node.process and node.process.returncode}; "
                        f"see {node.log_path}"
                    )
            try:
                admin = AdminClient({**self.admin_client_properties(), "log_level": 0})
                metadata = admin.list_topics(timeout=2)
                if len(metadata.brokers) >= self.nodes:
                    log.info(
                        "Apache Kafka %s %s ready at %s", kafka_version(), self.name, self.bootstrap_servers
                    )
                    return
            except Exception as exc:
                last_error = exc
            time.sleep(0.2)
        raise ApacheKafkaError(
            f"Apache Kafka {self.name} on {self.bootstrap_servers} did not answer metadata within "
            f"{timeout_s}s ({last_error}); see {self.log_path}"
        )

    def wait_coordinators(self, timeout_s: float = 60.0) -> None:
        """Wait until the group and transaction coordinators answer: a new cluster creates
        `__consumer_offsets` and `__transaction_state` on first use, and until their partitions are loaded
        a group request answers NOT_COORDINATOR and a producer's InitProducerId COORDINATOR_LOAD_IN_PROGRESS
        (clients retry, but a one-shot admin call fails)."""
        deadline = time.monotonic() + timeout_s
        admin = AdminClient({**self.admin_client_properties(), "log_level": 0})
        while True:
            try:
                (future,) = admin.describe_consumer_groups(
                    ["mirrorplane-readiness"], request_timeout=5
                ).values()
                future.result()
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise ApacheKafkaError(f"Apache Kafka {self.name}: no group coordinator ({exc})") from exc
                time.sleep(0.2)
        producer = Producer(
            {**self.admin_client_properties(), "transactional.id": "mirrorplane-readiness", "log_level": 0}
        )
        try:
            producer.init_transactions(max(1.0, deadline - time.monotonic()))
        except Exception as exc:
            raise ApacheKafkaError(f"Apache Kafka {self.name}: no transaction coordinator ({exc})") from exc

    def admin_client_properties(self) -> dict[str, str]:
        """librdkafka properties of the cluster's super user (the broker's own, for readiness and tests)."""
        properties = {"bootstrap.servers": self.bootstrap_servers}
        if self.security:
            properties |= {
                "security.protocol": self.security.protocol,
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": self.security.admin,
                "sasl.password": self.security.scram_users[self.security.admin],
            }
            if self.security.keystore_pem:
                # Readiness asks as the broker's own admin; clients verify the broker against their CA.
                properties["enable.ssl.certificate.verification"] = "false"
        return properties

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM and a controlled shutdown (SIGKILL after STOP_GRACE_S), or `kill`: kill -9. The
        broker-only nodes stop first: a controlled shutdown asks the controller."""
        for follower in self.followers:
            follower.stop(kill=kill)
        process, self.process = self.process, None
        _RUNNING.discard(self)
        stop_child(process, kill=kill, grace_s=STOP_GRACE_S)

    def remove_data(self) -> None:
        """Delete the stopped nodes' data, keeping their server.log."""
        for follower in self.followers:
            follower.remove_data()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __hash__(self) -> int:
        return id(self)


_RUNNING: set[ApacheKafkaBroker] = set()


@atexit.register
def _stop_all() -> None:
    for broker in list(_RUNNING):
        broker.stop()


@contextlib.contextmanager
def apache_clusters(
    aliases: list[str] | tuple[str, ...],
    *,
    ports: list[int] | None = None,
    workdir: Path | None = None,
    security: BrokerSecurity | None = None,
    config: Mapping[str, str] | None = None,
    heap: str = "1g",
    nodes: int = 1,
) -> Iterator[dict[str, ApacheKafkaBroker]]:
    """Start one cluster of `nodes` brokers per alias (its first node on `ports`, else free ports), side
    by side; stop them all on exit and delete their data (their server.log stays in each node's folder).
    `config`: broker properties over BROKER_DEFAULTS; `heap`: each JVM's -Xmx (1 GB carries a few thousand
    partitions)."""
    brokers = {
        alias: ApacheKafkaBroker(
            name=alias,
            port=ports[index] if ports else 0,
            workdir=(workdir / alias) if workdir else None,
            security=security,
            config=dict(config or {}),
            jvm_options=[f"-Xmx{heap}" if option.startswith("-Xmx") else option for option in JVM_OPTIONS],
            nodes=nodes,
        )
        for index, alias in enumerate(aliases)
    }
    try:
        for broker in brokers.values():
            if broker.workdir:
                broker.workdir.mkdir(parents=True, exist_ok=True)
            broker.launch()
        for broker in brokers.values():
            broker.wait_ready()
        for broker in brokers.values():
            broker.wait_coordinators()
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()
            broker.remove_data()
