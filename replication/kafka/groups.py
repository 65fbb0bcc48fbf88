"""Consumer group admin: list groups, read and commit group offsets, describe a group's state.

One adapter over confluent-kafka's AdminClient serving `checkpoint.SourceGroups` and
`checkpoint.TargetGroups`. Errors name the cluster, the group and the broker's reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from replication.checkpoint import ABSENT, CommittedOffset
from replication.cluster_ports import GroupAdminError, GroupNotEmpty
from replication.config import ClusterConfig
from replication.consumer_groups import GroupDescription, GroupListing, GroupMember
from replication.formats import Checkpoint, RecordFormatError
from replication.kafka.admin import ADMIN_TIMEOUT_S
from replication.kafka.clients import (
    consume_available,
    kafka_error_code,
    kafka_error_reason,
    make_admin,
    make_consumer,
)

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]


def _description(description) -> GroupDescription:
    members = tuple(
        GroupMember(
            member_id=member.member_id,
            client_id=member.client_id,
            host=member.host,
            assignment=tuple(
                sorted((tp.topic, tp.partition) for tp in (member.assignment.topic_partitions or []))
            )
            if member.assignment
            else (),
        )
        for member in description.members or []
    )
    return GroupDescription(
        description.group_id, _state_name(description.state), members, description.partition_assignor or ""
    )


def newest_checkpoints(
    cluster: ClusterConfig, topic: str, *, group: str, timeout_s: float
) -> tuple[dict[TopicPartitionKey, tuple[Checkpoint, int | None]], bool]:
    """The newest checkpoint of `group` per remote partition in the checkpoints topic `topic` (partition
    0, read from its start within `timeout_s`), each with its record's timestamp (ms); and whether the
    read reached the topic's end."""
    consumer = make_consumer(cluster, overrides={"enable.partition.eof": True, "fetch.wait.max.ms": 50})
    newest: dict[TopicPartitionKey, tuple[Checkpoint, int | None]] = {}
    try:
        # Offset 0, not OFFSET_BEGINNING (a ListOffsets round trip); auto.offset.reset=earliest covers a
        # log start moved by compaction.
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=timeout_s, cached=False
            )
        except KafkaException as exc:
            if kafka_error_code(exc) in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART):
                return newest, True  # no checkpoint was ever written
            raise
        if high <= low:
            return newest, True
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            for message in consume_available(consumer, wait_s=min(remaining, 0.2), max_messages=10_000):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return newest, True
                    if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        return newest, True  # no checkpoint was ever written
                    continue
                value = message.value()
                if value is None:
                    continue
                try:
                    checkpoint = Checkpoint.decode(message.key() or b"", value)
                except RecordFormatError:
                    continue
                if checkpoint.group == group:
                    kind, timestamp = message.timestamp()
                    newest[(checkpoint.topic, checkpoint.partition)] = (
                        checkpoint,
                        timestamp if kind else None,
                    )
    except KafkaException as exc:
        raise GroupAdminError(
            f"cluster {cluster.alias}: reading checkpoints topic {topic} failed: {kafka_error_reason(exc)}"
        ) from exc
    finally:
        consumer.close()
    return newest, False


def _state_name(state) -> str:
    """Kafka's state name (EMPTY, STABLE, ...); UNKNOWN when the broker does not say."""
    return getattr(state, "name", None) or str(state or "UNKNOWN").upper()


class GroupOffsetsAdmin:
    """Consumer group operations on one cluster, with a fixed request timeout."""

    def __init__(
        self, cluster: ClusterConfig, *, timeout_s: float = ADMIN_TIMEOUT_S, admin: AdminClient | None = None
    ) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._admin_client = admin

    @property
    def _admin(self) -> AdminClient:
        if self._admin_client is None:  # made when first asked: a read of checkpoints needs none
            self._admin_client = make_admin(self.cluster)
        return self._admin_client

    def _fail(self, what: str, exc: BaseException) -> GroupAdminError:
        return GroupAdminError(f"cluster {self.cluster.alias}: {what} failed: {kafka_error_reason(exc)}")

    def list_groups(self) -> list[str]:
        try:
            listing = self._admin.list_consumer_groups(request_timeout=self.timeout_s).result()
        except KafkaException as exc:
            raise self._fail("listing consumer groups", exc) from exc
        for error in listing.errors:
            log.warning("cluster %s: listing consumer groups: %s", self.cluster.alias, error)
        return sorted({group.group_id for group in listing.valid})

    def list_group_states(self) -> list[GroupListing]:
        """Every group the cluster knows, with its state as the listing reports it (one request)."""
        try:
            listing = self._admin.list_consumer_groups(request_timeout=self.timeout_s).result()
        except KafkaException as exc:
            raise self._fail("listing consumer groups", exc) from exc
        for error in listing.errors:
            log.warning("cluster %s: listing consumer groups: %s", self.cluster.alias, error)
        groups = {
            group.group_id: GroupListing(
                group.group_id, _state_name(group.state), bool(group.is_simple_consumer_group)
            )
            for group in listing.valid
        }
        return [groups[name] for name in sorted(groups)]

    def describe(self, groups: Sequence[str]) -> dict[str, GroupDescription]:
        """Each group's state and members with their assignments, in one request (ABSENT: unknown)."""
        if not groups:
            return {}
        try:
            futures = self._admin.describe_consumer_groups(list(groups), request_timeout=self.timeout_s)
        except KafkaException as exc:
            raise self._fail("describing consumer groups", exc) from exc
        described: dict[str, GroupDescription] = {}
        for group, future in futures.items():
            try:
                described[group] = _description(future.result())
            except KafkaException as exc:
                if kafka_error_code(exc) != KafkaError.GROUP_ID_NOT_FOUND:
                    raise self._fail(f"describing group {group}", exc) from exc
                described[group] = GroupDescription(group, ABSENT, ())
        return described

    def committed_offsets(self, group: str) -> dict[TopicPartitionKey, CommittedOffset]:
        """The group's committed offsets; a group with none (or deleted meanwhile) has an empty dict."""
        return self.committed_offsets_of([group])[group]

    def committed_offsets_of(
        self, groups: Sequence[str]
    ) -> dict[str, dict[TopicPartitionKey, CommittedOffset]]:
        """Every group's committed offsets; the requests (one group each, Kafka's rule) run together."""
        futures: dict[str, Future] = {}
        try:
            for group in groups:
                (futures[group],) = self._admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s
                ).values()
        except KafkaException as exc:
            raise self._fail("reading committed offsets", exc) from exc
        committed: dict[str, dict[TopicPartitionKey, CommittedOffset]] = {}
        for group, future in futures.items():
            try:
                result = future.result()
            except KafkaException as exc:
                if kafka_error_code(exc) != KafkaError.GROUP_ID_NOT_FOUND:
                    raise self._fail(f"reading committed offsets of group {group}", exc) from exc
                committed[group] = {}
                continue
            committed[group] = {
                (tp.topic, tp.partition): CommittedOffset(tp.offset, tp.metadata or "")
                for tp in result.topic_partitions
                if tp.error is None and tp.offset >= 0
            }
        return committed

    def group_state(self, group: str) -> str:
        try:
            (future,) = self._admin.describe_consumer_groups([group], request_timeout=self.timeout_s).values()
            description = future.result()
        except KafkaException as exc:
            if kafka_error_code(exc) == KafkaError.GROUP_ID_NOT_FOUND:
                return ABSENT
            raise self._fail(f"describing group {group}", exc) from exc
        return description.state.name

    def alter_offsets(
        self, group: str, offsets: Mapping[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, str]:
        """Commit `offsets`; partitions the broker refuses (e.g. the group became active) are returned."""
        request = [
            ConsumerGroupTopicPartitions(
                group,
                [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()],
            )
        ]
        try:
            (future,) = self._admin.alter_consumer_group_offsets(
                request, request_timeout=self.timeout_s
            ).values()
            result = future.result()
        except KafkaException as exc:
            return {key: kafka_error_reason(exc) for key in offsets}
        return {(tp.topic, tp.partition): tp.error.str() for tp in result.topic_partitions if tp.error}

    def newest_checkpoints(
        self, topic: str, *, group: str
    ) -> tuple[dict[TopicPartitionKey, tuple[Checkpoint, int | None]], bool]:
        return newest_checkpoints(self.cluster, topic, group=group, timeout_s=self.timeout_s)

    def delete_group(self, group: str) -> None:
        """Delete `group` (its committed offsets); a group already gone is fine. Raises GroupNotEmpty
        while it has members, else GroupAdminError."""
        try:
            (future,) = self._admin.delete_consumer_groups([group], request_timeout=self.timeout_s).values()
            future.result()
        except KafkaException as exc:
            if kafka_error_code(exc) == KafkaError.GROUP_ID_NOT_FOUND:
                return
            if kafka_error_code(exc) == KafkaError.NON_EMPTY_GROUP:
                raise GroupNotEmpty(
                    f"cluster {self.cluster.alias}: group {group} has members: {kafka_error_reason(exc)}"
                ) from exc
            raise self._fail(f"deleting group {group}", exc) from exc
