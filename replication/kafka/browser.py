"""Bounded reads of a topic for a person looking at it: its partitions with their offsets, the offset of a
moment, and at most `max_records` records from an offset, all within one timeout.

Nothing here reads a whole topic: every call is bounded by a record count and a deadline, and a partition
that yields nothing by then returns what it has (the caller says so). Errors are `BrowseError` naming the
cluster, the topic and the broker's reason; an unknown topic is `UnknownTopic`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replication.browse import KafkaRecord, PartitionOffsets, record_of
from replication.cluster_ports import BrowseError, RecordPage, TopicListing, UnknownTopic
from replication.config import ClusterConfig
from replication.kafka.clients import (
    BOUNDED_PREFETCH,
    ClientValue,
    consume_available,
    kafka_error_reason,
    make_admin,
    make_consumer,
    source_record,
)

log = logging.getLogger(__name__)

# Fetch no more than a page needs: a browsing consumer must not pull megabytes it will not show.
_FETCH_LIMITS: dict[str, ClientValue] = {
    "fetch.wait.max.ms": 50,
    **BOUNDED_PREFETCH,
    "fetch.message.max.bytes": 262144,
    "enable.partition.eof": True,
}


Key = tuple[str, int]  # (topic, partition)


class TopicBrowser:
    """Reads one cluster's topics, all its calls within `timeout_s` together: one deadline from its
    creation, each call bounded by what is left of it (a web request's reads share one deadline)."""

    def __init__(self, cluster: ClusterConfig, *, timeout_s: float) -> None:
        self.cluster = cluster
        self.budget_s = timeout_s
        self.call_timeout_s = timeout_s  # the bound the last call got
        self._deadline = time.monotonic() + timeout_s

    @functools.cached_property
    def _admin(self) -> AdminClient:
        return make_admin(self.cluster)  # when first asked: a read of records needs none

    @property
    def timeout_s(self) -> float:
        """The bound of the next call: what is left of the deadline."""
        self.call_timeout_s = max(self._deadline - time.monotonic(), 0.001)
        return self.call_timeout_s

    def _fail(self, what: str, exc: BaseException) -> BrowseError:
        error = BrowseError(
            f"cluster {self.cluster.alias} ({self.cluster.bootstrap_servers}): {what} failed within "
            f"{self.call_timeout_s:.1f}s: {kafka_error_reason(exc)}"
        )
        error.cut_short = self.call_timeout_s < self.budget_s / 2
        return error

    def topics(self) -> list[TopicListing]:
        try:
            metadata = self._admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise self._fail("listing topics", exc) from exc
        listings = [
            TopicListing(name, len(topic.partitions))
            for name, topic in metadata.topics.items()
            if topic.error is None
        ]
        return sorted(listings, key=lambda listing: listing.name)

    def topic_metadata(self, topic: str):
        """The topic's metadata (its partitions with leader, replicas and in-sync replicas)."""
        # The whole listing, not list_topics(topic=...): that request may auto-create the topic.
        try:
            metadata = self._admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise self._fail(f"reading metadata of topic {topic}", exc) from exc
        described = metadata.topics.get(topic)
        if described is None or described.error is not None or not described.partitions:
            raise UnknownTopic(f"cluster {self.cluster.alias} has no topic {topic!r}")
        return described

    def partition_count(self, topic: str) -> int:
        return len(self.topic_metadata(topic).partitions)

    def _list_offsets(self, request: Mapping[TopicPartition, OffsetSpec], what: str) -> dict[Key, int]:
        if not request:
            return {}
        try:
            futures = self._admin.list_offsets(dict(request), request_timeout=self.timeout_s)
            return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}
        except KafkaException as exc:
            raise self._fail(what, exc) from exc

    def earliest_offsets(self, partitions: Iterable[Key]) -> dict[Key, int]:
        request = {TopicPartition(t, p): OffsetSpec.earliest() for t, p in partitions}
        return self._list_offsets(request, "reading earliest offsets")

    def end_offsets(self, partitions: Iterable[Key]) -> dict[Key, int]:
        request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
        return self._list_offsets(request, "reading end offsets")

    def offsets_at(self, partitions: Iterable[Key], timestamp_ms: int) -> dict[Key, int]:
        """Each partition's first offset whose timestamp is at or after the moment (-1: none is)."""
        request = {TopicPartition(t, p): OffsetSpec.for_timestamp(timestamp_ms) for t, p in partitions}
        return self._list_offsets(request, "reading offsets by time")

    def partition_offsets(self, topic: str) -> list[PartitionOffsets]:
        """Each partition's earliest offset and end offset (the high watermark) as a fetch finds it
        (`fetched_ends`), with the listed one when it was lower."""
        keys = [(topic, p) for p in range(self.partition_count(topic))]
        earliest = self.earliest_offsets(keys)
        listed = {key: max(end, earliest[key]) for key, end in self.end_offsets(keys).items()}
        # Half of what is left at most: a page's records are read after.
        fetched = fetched_ends(self.cluster, listed, timeout_s=self.timeout_s / 2)
        offsets = []
        for key in keys:
            end, said = fetched[key], listed[key]
            offsets.append(PartitionOffsets(key[1], earliest[key], end, None if end == said else said))
        return offsets

    def read(
        self, topic: str, partition: int, *, start: int, max_records: int, stop_before: int | None = None
    ) -> RecordPage:
        """At most `max_records` records of the partition from offset `start` (before `stop_before` when
        given), read within the timeout; fewer when the partition ends first."""
        key = (topic, partition)
        pages = read_records(
            self.cluster,
            {key: start},
            max_records=max_records,
            timeout_s=self.timeout_s,
            stop_before=None if stop_before is None else {key: stop_before},
        )
        return pages[key]

    def read_many(
        self,
        starts: Mapping[Key, int],
        *,
        max_records: int,
        stop_before: Mapping[Key, int] | None = None,
        keep: Callable[[KafkaRecord], bool] | None = None,
        max_kept: int | None = None,
    ) -> dict[Key, RecordPage]:
        return read_records(
            self.cluster,
            starts,
            max_records=max_records,
            timeout_s=self.timeout_s,
            stop_before=stop_before,
            keep=keep,
            max_kept=max_kept,
        )


# Asked for nothing but the end: the broker need not hold the fetch long for records to arrive (the
# embedded broker never answers a fetch that may not wait at all); read_uncommitted, whose fetch answers
# the high watermark (read_committed's answers the last stable offset, below it while a transaction is
# open, and reaches no end-of-partition at the listed end).
_END_FETCH = _FETCH_LIMITS | {
    "fetch.wait.max.ms": 10,
    "fetch.message.max.bytes": 1,
    "auto.offset.reset": "latest",
    "isolation.level": "read_uncommitted",
}


def fetched_ends(cluster: ClusterConfig, listed: Mapping[Key, int], *, timeout_s: float) -> dict[Key, int]:
    """Each partition's end offset as it really is: the high watermark a fetch from its listed end answers
    with, never below the listed one. ListOffsets answers are not that (the embedded demo broker lists an
    end below records it holds, by the size of the last batch - 1), and an end read from them shows old
    records as "the newest" and refuses offsets the partition holds; Apache Kafka's fetch answers the
    same end at once. One consumer fetches every partition together; a partition whose fetch failed or
    did not answer within `timeout_s` keeps its listed end."""
    ends = dict(listed)
    if not listed:
        return ends
    consumer = make_consumer(cluster, overrides=_END_FETCH)
    pending = {TopicPartition(topic, p): (topic, p) for topic, p in listed}
    try:
        consumer.assign([TopicPartition(topic, p, offset) for (topic, p), offset in listed.items()])
        deadline = time.monotonic() + timeout_s
        while pending and (remaining := deadline - time.monotonic()) > 0:
            message = consumer.poll(min(remaining, 0.05))  # serves the fetch answers
            error = None if message is None else message.error()
            if message is not None and error is not None and error.code() != KafkaError._PARTITION_EOF:
                failed = pending.pop(TopicPartition(message.topic() or "", message.partition() or 0), None)
                if failed is not None:
                    log.debug("cluster %s: the end of %s[%d]: %s", cluster.alias, *failed, error.str())
            # Known once the partition's first fetch answered: the high watermark that answer carried.
            known = {
                tp: high
                for tp in pending
                if (high := consumer.get_watermark_offsets(tp, cached=True)[1]) >= 0
            }
            for tp, high in known.items():
                key = pending.pop(tp)
                ends[key] = max(ends[key], high)
            if known:
                consumer.pause(list(known))
    except KafkaException as exc:
        raise BrowseError(
            f"cluster {cluster.alias}: reading end offsets failed: {kafka_error_reason(exc)}"
        ) from exc
    finally:
        consumer.close()
    return ends


def read_records(
    cluster: ClusterConfig,
    starts: Mapping[tuple[str, int], int],
    *,
    max_records: int,
    timeout_s: float,
    stop_before: Mapping[tuple[str, int], int] | None = None,
    keep: Callable[[KafkaRecord], bool] | None = None,
    max_kept: int | None = None,
) -> dict[tuple[str, int], RecordPage]:
    """Up to `max_records` records per partition from each start offset, with one consumer and one
    deadline; a partition is done at its end, at `stop_before`, or when it has read `max_records`. With
    `keep`, only the records it keeps are returned (a search), and every partition stops once `max_kept`
    are kept in all: memory holds the kept records only."""
    results: dict[tuple[str, int], list[KafkaRecord]] = {key: [] for key in starts}
    scanned = dict.fromkeys(starts, 0)
    positions: dict[tuple[str, int], int] = {}
    kept = 0
    if not starts or max_records <= 0:
        return {key: RecordPage([], True) for key in starts}
    # An offset below the log start (retention deleted it) reads from the log start.
    consumer = make_consumer(cluster, overrides=_FETCH_LIMITS | {"auto.offset.reset": "earliest"})
    pending = set(starts)
    limits = dict(stop_before or {})
    try:
        consumer.assign([TopicPartition(topic, p, offset) for (topic, p), offset in starts.items()])
        deadline = time.monotonic() + timeout_s
        while pending and (remaining := deadline - time.monotonic()) > 0:
            done = []
            for message in consume_available(
                consumer, wait_s=min(remaining, 0.2), max_messages=max_records + 1
            ):
                key = (message.topic(), message.partition())
                if key not in pending:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(key)
                        done.append(TopicPartition(*key))
                        continue
                    raise BrowseError(
                        f"cluster {cluster.alias}: reading {key[0]}[{key[1]}]: {error.str()}"
                    ) from KafkaException(error)
                record = record_of(source_record(message))
                limit = limits.get(key)
                if limit is not None and record.offset >= limit:
                    pending.discard(key)
                    done.append(TopicPartition(*key))
                    continue
                scanned[key] += 1
                positions[key] = record.offset + 1
                if keep is None or keep(record):
                    results[key].append(record)
                    kept += 1
                if scanned[key] >= max_records:
                    pending.discard(key)
                    done.append(TopicPartition(*key))
                if max_kept is not None and kept >= max_kept:
                    break
            if max_kept is not None and kept >= max_kept:
                break
            if done:
                consumer.pause(done)
    except KafkaException as exc:
        raise BrowseError(
            f"cluster {cluster.alias}: reading records failed: {kafka_error_reason(exc)}"
        ) from exc
    finally:
        consumer.close()
    return {
        key: RecordPage(records, key not in pending, scanned[key], positions.get(key))
        for key, records in results.items()
    }
