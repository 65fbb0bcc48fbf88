"""Topic ACL admin for `sync.topic.acls`: the adapter over confluent-kafka's describe_acls / create_acls.

A cluster takes part in ACL sync only when it has an authorizer. Apache Kafka 4 without one answers
DescribeAcls with an empty list (through librdkafka; older brokers with SECURITY_DISABLED) and CreateAcls
with SECURITY_DISABLED, which `create` reports as unsupported (MM2 then logs that no ACL syncing takes
place); some Kafka-compatible
brokers (tansu, the embedded broker) have no authorizer, return no authorized operations in
DescribeCluster, list no ACLs and answer CreateAcls with a reply librdkafka aborts the process on. So
`unsupported_reason` asks DescribeCluster for the authorized operations first, and ACLs are only read or
written on a cluster that answers it; `AclSyncUnsupported` carries the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from replication.acls import TopicAcl
from replication.config import ClusterConfig
from replication.kafka.admin import ADMIN_TIMEOUT_S, TopicAdminError
from replication.kafka.clients import kafka_error_code, kafka_error_reason, make_admin

# None matches any name, principal and host (confluent-kafka's documented filter), though it annotates
# them str.
_ANY_TOPIC_ACL = AclBindingFilter(
    ResourceType.TOPIC,
    None,  # type: ignore[arg-type]
    ResourcePatternType.ANY,
    None,  # type: ignore[arg-type]
    None,  # type: ignore[arg-type]
    AclOperation.ANY,
    AclPermissionType.ANY,
)


class AclSyncUnsupported(RuntimeError):
    """The cluster cannot take part in ACL sync; str() is the reason."""


def _topic_acl(binding: AclBinding) -> TopicAcl:
    return TopicAcl(
        topic=binding.name,
        pattern_type=_enum_name(binding.resource_pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=_enum_name(binding.operation),
        permission=_enum_name(binding.permission_type),
    )


def _enum_name(value: Enum | str | int) -> str:
    """The name of an AclBinding's enum field: an enum once the binding is made (confluent-kafka converts
    the str or int it was given, which its annotations still allow)."""
    if not isinstance(value, Enum):
        raise TypeError(f"an ACL binding's field is {value!r}, not an enum")
    return value.name


def _binding(acl: TopicAcl) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        acl.topic,
        ResourcePatternType[acl.pattern_type],
        acl.principal,
        acl.host,
        AclOperation[acl.operation],
        AclPermissionType[acl.permission],
    )


class TopicAclAdmin:
    """Topic ACLs of one cluster, with a fixed request timeout; the admin client is made on first use (a
    flow with ACL sync disabled holds none)."""

    def __init__(self, cluster: ClusterConfig, *, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._client: AdminClient | None = None

    @property
    def _admin(self) -> AdminClient:
        if self._client is None:
            self._client = make_admin(self.cluster)
        return self._client

    def _failed(self, what: str, exc: KafkaException) -> TopicAdminError:
        return TopicAdminError(f"{what} on cluster {self.cluster.alias} failed: {kafka_error_reason(exc)}")

    def unsupported_reason(self) -> str | None:
        """Why this cluster cannot take part in ACL sync (no authorizer), None when it can."""
        try:
            description = self._admin.describe_cluster(
                include_authorized_operations=True, request_timeout=self.timeout_s
            ).result()
        except KafkaException as exc:
            if kafka_error_code(exc) == KafkaError._UNSUPPORTED_FEATURE:
                return None  # a broker older than DescribeCluster (Kafka < 2.8): DescribeAcls decides
            raise self._failed("describing the cluster", exc) from exc
        if description.authorized_operations is None:
            return "it has no authorizer (DescribeCluster returns no authorized operations)"
        return None

    def topic_acls(self) -> list[TopicAcl]:
        """Every ACL on topics (any pattern type); AclSyncUnsupported when the cluster has no authorizer."""
        if reason := self.unsupported_reason():
            raise AclSyncUnsupported(reason)
        try:
            bindings = self._admin.describe_acls(_ANY_TOPIC_ACL, request_timeout=self.timeout_s).result()
        except KafkaException as exc:
            if kafka_error_code(exc) == KafkaError.SECURITY_DISABLED:
                raise AclSyncUnsupported("no authorizer is configured (SECURITY_DISABLED)") from exc
            raise self._failed("describing topic ACLs", exc) from exc
        return [_topic_acl(binding) for binding in bindings]

    def create(self, acls: Iterable[TopicAcl]) -> None:
        """Create `acls` (call only after `topic_acls` succeeded on this cluster)."""
        bindings = [_binding(acl) for acl in acls]
        if not bindings:
            return
        try:
            for future in self._admin.create_acls(bindings, request_timeout=self.timeout_s).values():
                future.result()
        except KafkaException as exc:
            if kafka_error_code(exc) == KafkaError.SECURITY_DISABLED:
                # Apache Kafka without an authorizer lists no ACLs (DescribeAcls answers an empty list)
                # and refuses to create one.
                raise AclSyncUnsupported("no authorizer is configured (SECURITY_DISABLED)") from exc
            raise self._failed(f"creating {len(bindings)} topic ACL(s)", exc) from exc
