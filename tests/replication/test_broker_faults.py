"""Faults only a real broker has: kill -9 and a restart of the source broker, then of the target broker, in
the middle of replication under load. Nothing is lost; at exactly_once nothing is duplicated (at
at_least_once, with one delivery report per partition per batch, a record may be written twice, never
skipped); replication resumes by itself."""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import pytest

from harness.runtime import wait_until
from replication.config import ClusterConfig, DeliveryGuarantee
from replication.kafka.clients import make_producer
from replication.kafka.positions import KafkaPositionStore
from replication.mirroring import source_offsets
from replication.source import SliceResult
from tests.conftest import KAFKA_KIND
from tests.replication.test_source_task import create_topics, make_task, read_partition

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.skipif(KAFKA_KIND != "apache", reason="the embedded broker loses everything on restart"),
]

PARTITIONS = 3
RATE_PER_S = 300


class SteadyLoad(threading.Thread):
    """Produces `RATE_PER_S` records/s round robin over the partitions until stopped; the idempotent
    producer retries through a broker outage (a 2-minute delivery timeout), so every record is written."""

    def __init__(self, cluster: ClusterConfig, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic = cluster, topic
        self.stop_event = threading.Event()
        self.failed: list[str] = []
        self.sent = 0

    def run(self) -> None:
        producer = make_producer(self.cluster, overrides={"message.timeout.ms": 120_000})

        def on_delivery(error, _message) -> None:
            if error is not None:
                self.failed.append(str(error))

        started = time.monotonic()
        while not self.stop_event.is_set():
            due = int((time.monotonic() - started) * RATE_PER_S)
            while self.sent < due:
                producer.produce(
                    self.topic,
                    value=b"r%d" % self.sent,
                    partition=self.sent % PARTITIONS,
                    on_delivery=on_delivery,
                )
                self.sent += 1
            producer.poll(0.01)
        assert producer.flush(120) == 0


class TaskLoop(threading.Thread):
    """Runs the task's slices as dedicated mode does until stopped; keeps every slice's result."""

    def __init__(self, task) -> None:
        super().__init__(daemon=True)
        self.task = task
        self.stop_event = threading.Event()
        self.results: list[SliceResult] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.results.append(self.task.run_slice(max_seconds=0.5, settle=False))
        self.results.append(self.task.run_slice(max_seconds=0.5, settle=True))


@contextlib.contextmanager
def _replicating_under_load(start_broker, names: tuple[str, str], topic: str, **flow_settings):
    """Two brokers of the test's own, a task between them assigned `topic`'s partitions running slices
    as dedicated mode does, and a steady load on the source: (source broker, target broker, target,
    load, loop). On leaving: the load stopped, every record acknowledged, the task closed."""
    source_broker, target_broker = start_broker(names[0]), start_broker(names[1])
    source = ClusterConfig(alias="A", bootstrap_servers=source_broker.bootstrap_servers)
    target = ClusterConfig(alias="B", bootstrap_servers=target_broker.bootstrap_servers)
    create_topics(source, [topic], PARTITIONS)
    create_topics(target, [f"A.{topic}"], PARTITIONS)
    store = KafkaPositionStore(target, source_alias="A")
    task = make_task(source, target, [topic], store=store, **flow_settings)
    task.assign([(topic, p) for p in range(PARTITIONS)])
    load, loop = SteadyLoad(source, topic), TaskLoop(task)
    load.start()
    loop.start()
    try:
        wait_until(lambda: replicating(loop, 0), timeout_s=60, what="replication under load")
        yield source_broker, target_broker, target, load, loop
        load.stop_event.set()
        load.join(timeout=150)
        assert not load.failed and not load.is_alive()
        expected = {p: len(range(p, load.sent, PARTITIONS)) for p in range(PARTITIONS)}
        wait_until(
            lambda: all(
                (loop.results[-1].positions if loop.results else {}).get((topic, p), -1) >= expected[p]
                for p in range(PARTITIONS)
            ),
            timeout_s=120,
            what="every record acknowledged",
        )
    finally:
        loop.stop_event.set()
        loop.join(timeout=60)
        load.stop_event.set()
        task.close()
        store.close()


def replicating(loop: TaskLoop, since: int) -> bool:
    """A slice from the `since`-th on ran clean and had records acknowledged by the target."""
    return any(result.ok and result.records > 0 for result in loop.results[since:])


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.EXACTLY_ONCE, DeliveryGuarantee.AT_LEAST_ONCE])
def test_kill_9_of_the_source_then_the_target_broker_loses_nothing(start_broker, unique_name, guarantee):
    topic = unique_name
    names = ("fault-source", "fault-target")
    with _replicating_under_load(start_broker, names, topic, delivery_guarantee=guarantee) as running:
        source_broker, target_broker, target, load, loop = running
        for broker in (source_broker, target_broker):
            broker.stop(kill=True)  # kill -9 under load: down while its JVM starts again
            broker.start()  # same port, same data: the log is recovered
            since = len(loop.results)
            wait_until(
                lambda since=since: replicating(loop, since),
                timeout_s=120,
                what=f"replication resumed after {broker.name} restarted",
            )
    source = ClusterConfig(alias="A", bootstrap_servers=source_broker.bootstrap_servers)
    for partition in range(PARTITIONS):
        source_values = [m.value() for m in read_partition(source, topic, partition)]
        assert source_values == [b"r%d" % i for i in range(partition, load.sent, PARTITIONS)]
        if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            remote = read_partition(target, f"A.{topic}", partition)
            assert [m.value() for m in remote] == source_values, f"partition {partition}: lost or duplicated"
            assert source_offsets([m.headers() for m in remote]) == list(range(len(source_values)))
    if guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
        _at_least_once_copy(target, topic, load.sent)
    # Replication resumed by itself: the last slices ran clean. (How the flow shows a target outage to
    # operators, FAULTED with "target cluster B unreachable", is tests/workers/test_failures.py.)
    assert loop.results[-1].ok, loop.results[-1].errors


def _at_least_once_copy(target, topic: str, sent: int) -> None:
    """Each partition's target records, as source offsets: every one there, each after the one before it
    or again from an earlier one (a restart resends what was not acknowledged), never one skipped."""
    for partition in range(PARTITIONS):
        expected = len(range(partition, sent, PARTITIONS))
        copied = [int(m.value()[1:]) // PARTITIONS for m in read_partition(target, f"A.{topic}", partition)]
        assert copied[0] == 0 and all(b <= a + 1 for a, b in zip(copied, copied[1:], strict=False)), partition
        assert set(copied) == set(range(expected)), f"partition {partition}: lost records"


def test_at_least_once_records_that_time_out_in_the_producer_are_sent_again_never_skipped(
    start_broker, unique_name
):
    """The case one delivery report per batch must not miss: the target hangs (SIGSTOP) longer than the
    producer's message.timeout.ms (2 s here) under load, so records time out in the producer while later
    ones may be written once it answers again (librdkafka leaves timeouts out of its gapless guarantee).
    A report that failed or came after its window restarts the partition from its oldest record not
    acknowledged: every record reaches the target."""
    topic = unique_name
    names = ("timeout-source", "timeout-target")
    timeout = {"producer.message.timeout.ms": "2000"}
    with _replicating_under_load(start_broker, names, topic, extra=timeout) as running:
        _, target_broker, target, load, loop = running
        target_broker.process.send_signal(signal.SIGSTOP)
        try:
            time.sleep(6)  # three message timeouts: records sent meanwhile fail in the producer
        finally:
            target_broker.process.send_signal(signal.SIGCONT)
        since = len(loop.results)
        wait_until(
            lambda: replicating(loop, since),
            timeout_s=120,
            what="replication resumed after the target answered again",
        )
    errors = [e for r in loop.results for e in r.errors]
    assert errors, "the outage was not noticed: the test did not make records time out"
    _at_least_once_copy(target, topic, load.sent)
