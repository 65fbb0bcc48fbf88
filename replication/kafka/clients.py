"""Client factories: the one place that turns a ClusterConfig into confluent-kafka clients.

librdkafka logs go through Python logging (so secrets masking and levels apply in one place) instead of
stderr.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from replication.config import ClusterConfig
from replication.jaas import jaas_options
from replication.logonce import first_time
from replication.task_io import RecordSink, SourceRecord

_librdkafka_log = logging.getLogger("replication.kafka.librdkafka")
# A client property's value as librdkafka takes it; its callbacks (`error_cb`, `stats_cb`) and the logger
# are given to the client apart, as keyword arguments.
ClientValue = str | int | float | bool

# Every consumer Mirrorplane makes (`make_consumer`) fetches a partition again this long after its
# prefetch queue passed librdkafka's thresholds (`queued.max.messages.kbytes`, `queued.min.messages`), not
# after librdkafka's 1 s default, which it waits however fast the application drains the queue: a reader
# of a backlog (a task catching up, a task's positions or offset syncs at its start, a verification range)
# otherwise idles a second at every full queue. Measured (November 30 2026, one Apache Kafka broker, load
# 1-2), capped readers (BOUNDED_PREFETCH): 500 partitions x 100 records of 100 B, 5.1-5.2 s with the default
# and 0.35-0.41 s at 10 ms; 100 partitions x 1,000 records of 1 KB, 36.9-38.6 s against 1.2-1.4 s, the bytes
# fetched equal; the engine: `python -m bench engine --ab consumer.fetch.queue.backoff.ms=10`, x1.13-1.69
# records/s (docs/performance.md). A cluster's or a flow's `consumer.fetch.queue.backoff.ms` wins.
FETCH_QUEUE_BACKOFF_MS = 10
# A consumer that reads what it needs over many partitions at once (verification's ranges, a failover's
# first unreplicated records, a browsed page) caps what librdkafka prefetches, so as not to over-read.
BOUNDED_PREFETCH: dict[str, ClientValue] = {"queued.max.messages.kbytes": 1_024}
Callbacks = Mapping[str, Callable[..., None]]

# Properties we set on purpose that librdkafka calls experimental (a CONFWARN per client otherwise).
# enable.gapless.guarantee is the exactly_once producer's guarantee (docs/delivery-guarantees.md).
INTENDED_EXPERIMENTAL_PROPERTIES = ("enable.gapless.guarantee",)
_CONFWARN_EXPERIMENTAL = re.compile(r"CONFWARN .*Configuration property (\S+) is experimental")


class IntendedExperimentalFilter(logging.Filter):
    """librdkafka's "property X is experimental" warning, for a property in
    INTENDED_EXPERIMENTAL_PROPERTIES, becomes one INFO line per process; every other warning passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        match = _CONFWARN_EXPERIMENTAL.search(record.getMessage())
        if match is None or match.group(1) not in INTENDED_EXPERIMENTAL_PROPERTIES:
            return True
        if not first_time(logger_name=record.name, text=match.group(1)):
            return False
        record.msg = "clients set %s on purpose (librdkafka calls it experimental; logged once per process)"
        record.args = (match.group(1),)
        record.levelno, record.levelname = logging.INFO, "INFO"
        return True


# A producer fenced by a newer instance of its transactional id: librdkafka logs it at CRITICAL (FATAL,
# TXNERR) and ERROR (ADDPARTS, ...). That is the exactly-once protection working (a zombie, or a task of an
# older assignment generation, as when a new topic joins a flow), and the task says so itself, as a
# WARNING naming the flow and the task (`replication.source`): librdkafka's lines are WARNINGs too, so that
# a designed fencing pages nobody.
_FENCED = re.compile(r"fenced by a newer instance|with an old epoch|PRODUCER_FENCED|INVALID_PRODUCER_EPOCH")


class FencedProducerFilter(logging.Filter):
    """librdkafka's lines about a fenced producer at WARNING at most; every other line as it comes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING and _FENCED.search(record.getMessage()):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_librdkafka_log.addFilter(IntendedExperimentalFilter())
_librdkafka_log.addFilter(FencedProducerFilter())


def librdkafka_properties(properties: Mapping[str, ClientValue]) -> dict[str, ClientValue]:
    """Java client properties as librdkafka reads them: the JAAS line becomes username/password, Java's
    auto.offset.reset=none is librdkafka's `error`."""
    translated = {key: value for key, value in properties.items() if key != "sasl.jaas.config"}
    jaas = properties.get("sasl.jaas.config")
    if isinstance(jaas, str):
        options = jaas_options(jaas)
        for option in ("username", "password"):
            if option in options:
                translated.setdefault(f"sasl.{option}", options[option])
    if str(properties.get("auto.offset.reset", "")).lower() == "none":
        translated["auto.offset.reset"] = "error"  # Java's "none": fail rather than reset
    if properties.get("ssl.endpoint.identification.algorithm") == "":
        translated["ssl.endpoint.identification.algorithm"] = "none"  # Java's "" means no verification
    return translated


def make_consumer(
    cluster: ClusterConfig,
    *,
    group_id: str | None = None,
    overrides: Mapping[str, ClientValue] | None = None,
    callbacks: Callbacks | None = None,
) -> Consumer:
    """A consumer for assign()-style reading; auto commit off (positions are ours to store)."""
    properties = consumer_properties(cluster, group_id=group_id, overrides=overrides)
    return Consumer(librdkafka_properties(properties), logger=_librdkafka_log, **(callbacks or {}))


def consumer_properties(
    cluster: ClusterConfig, *, group_id: str | None = None, overrides: Mapping[str, ClientValue] | None = None
) -> dict[str, ClientValue]:
    """`make_consumer`'s properties: ours < the cluster's `<alias>.consumer.*` < `overrides`."""
    return {
        "group.id": group_id or "mirrorplane-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        **cluster.client_properties("consumer"),
        **(overrides or {}),
    }


def make_producer(cluster: ClusterConfig, *, overrides: Mapping[str, ClientValue] | None = None) -> Producer:
    """An idempotent producer (acks=all, ordered, no duplicates from internal retries)."""
    properties = producer_properties(cluster, overrides=overrides)
    return Producer(librdkafka_properties(properties), logger=_librdkafka_log)


def producer_properties(
    cluster: ClusterConfig, *, overrides: Mapping[str, ClientValue] | None = None
) -> dict[str, ClientValue]:
    """`make_producer`'s properties: ours < the cluster's `<alias>.producer.*` < `overrides`."""
    return {
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        **cluster.client_properties("producer"),
        **(overrides or {}),
    }


def consume_available(consumer: Consumer, *, wait_s: float, max_messages: int) -> list:
    """Up to `max_messages` messages (events included: a partition's end, an error): the first waited for
    up to `wait_s` and returned as soon as it is there, then what is fetched already, without waiting.
    One `consume(num_messages=n, timeout=t)` returns only once it has n messages or t passed, so a read
    asking for a batch waited out its whole timeout at every end of what was there (replication.fetching)."""
    first = consumer.poll(wait_s)
    if first is None:
        return []
    return [first, *consumer.consume(max_messages - 1, timeout=0)] if max_messages > 1 else [first]


def source_records(messages: list[Message]) -> Sequence[SourceRecord]:
    """A consumer's messages as the engine's `SourceRecord`s, unwrapped. confluent-kafka types
    `Message.headers()` as what a producer accepts (a dict, or str values); a consumer's records carry
    the list of (name, bytes) pairs the Protocol names."""
    return cast("Sequence[SourceRecord]", messages)


def source_record(message: Message) -> SourceRecord:
    """One consumer message as a `SourceRecord` (`source_records`)."""
    return cast("SourceRecord", message)


def record_sink(producer: Producer) -> RecordSink:
    """A producer as the task's `RecordSink`, unwrapped: its `produce` takes the Protocol's headers, a list
    of (name, bytes) pairs, which confluent-kafka types as a list of (name, str or bytes) (invariant)."""
    return cast("RecordSink", producer)


def make_admin(
    cluster: ClusterConfig,
    *,
    overrides: Mapping[str, ClientValue] | None = None,
    callbacks: Callbacks | None = None,
) -> AdminClient:
    properties: dict[str, ClientValue] = {**cluster.client_properties("admin"), **(overrides or {})}
    return AdminClient(librdkafka_properties(properties), logger=_librdkafka_log, **(callbacks or {}))


def kafka_error_reason(exc: BaseException) -> str:
    """The broker's or librdkafka's own words for a failed request (`KafkaError.str()`), else str(exc)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return str(exc)


def kafka_error_code(exc: BaseException) -> int | None:
    """The `KafkaError` code of a failed request, or None when the exception carries none."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code()
    return None


# What a cluster that does not answer, or does not accept our credentials, reports; any other error code is
# a request the cluster answered and refused (an invalid offset or time, an unknown topic or partition, a
# group in use, an ACL on one topic).
CLUSTER_FAILURE_CODES = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError._SSL,
        KafkaError._AUTHENTICATION,
        KafkaError._WAIT_COORD,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
        KafkaError.ILLEGAL_SASL_STATE,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


def is_cluster_failure(exc: BaseException) -> bool:
    """Whether `exc` says the cluster did not answer (unreachable, timed out) or refused our credentials,
    rather than answered a request with an error. The first Kafka error code along `exc` and the
    exceptions it was raised from decides; none (a refused TCP connection, a deadline of ours) is a
    cluster failure. Only cluster failures count against a cluster's circuit breaker."""
    seen: BaseException | None = exc
    for _ in range(10):  # a chain of causes, never a cycle
        if seen is None:
            break
        if (code := kafka_error_code(seen)) is not None:
            return code in CLUSTER_FAILURE_CODES
        seen = seen.__cause__
    return True
