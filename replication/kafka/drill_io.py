"""The reads of a failover drill: the next record of a group on each partition, as a consumer of it
would read it (read_committed, from the group's committed offsets or from given offsets)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Set

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replication.browse import mirrored_record
from replication.cluster_ports import DrillIOError
from replication.config import ClusterConfig
from replication.kafka.clients import consume_available, kafka_error_reason, make_consumer, source_record
from replication.verification import MirroredRecord

TopicPartitionKey = tuple[str, int]


def next_records(
    cluster: ClusterConfig,
    *,
    starts: Mapping[TopicPartitionKey, int] | None = None,
    group: str | None = None,
    partitions: list[TopicPartitionKey] | None = None,
    wait_for: Set[TopicPartitionKey] = frozenset(),
    timeout_s: float = 10.0,
    tick: Callable[[], None] = lambda: None,
) -> dict[TopicPartitionKey, MirroredRecord | None]:
    """The first record at or after each start offset (or, with `group`, each committed offset of the
    group on `partitions`), None where the partition ends there. Partitions in `wait_for` are not
    settled by their end: their record is awaited until `timeout_s`. `tick` runs at every poll (a lease).
    Nothing is committed."""
    consumer = make_consumer(
        cluster,
        group_id=group,
        overrides={
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        },
    )
    try:
        if group is not None:
            committed = consumer.committed(
                [TopicPartition(t, p) for t, p in partitions or []], timeout=timeout_s
            )
            starts = {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}
        starts = dict(starts or {})
        found: dict[TopicPartitionKey, MirroredRecord | None] = {key: None for key in starts}
        if not starts:
            return found
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in starts.items()])
        pending = set(starts)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            tick()
            settled = []
            for message in consume_available(consumer, wait_s=0.2, max_messages=1000):
                key = (message.topic(), message.partition())
                if key not in pending:
                    continue
                error = message.error()
                if error is None:
                    found[key] = mirrored_record(source_record(message))
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise DrillIOError(f"cluster {cluster.alias}: reading {key[0]}[{key[1]}]: {error.str()}")
                elif key in wait_for:
                    continue
                pending.discard(key)
                settled.append(TopicPartition(*key))
            if settled:
                consumer.pause(settled)
        unsettled = sorted(pending - wait_for)
        if unsettled:  # never read as "no next record": that would pass a drill on a slow read
            names = ", ".join(f"{t}[{p}]" for t, p in unsettled[:5])
            raise DrillIOError(f"cluster {cluster.alias}: {names} not read within {timeout_s:g} s")
        return found
    except KafkaException as exc:
        raise DrillIOError(
            f"cluster {cluster.alias}: reading next records: {kafka_error_reason(exc)}"
        ) from exc
    finally:
        consumer.close()
