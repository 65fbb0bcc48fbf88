"""MM2's topic ACL sync rule (pure) and the embedded broker, which has no authorizer (reported once)."""

from __future__ import annotations

import logging

import pytest

from replication.acls import TopicAcl, missing_acls, plan_topic_acls
from replication.config import FlowConfig
from replication.filters import TopicFilter
from replication.kafka.acls import AclSyncUnsupported, TopicAclAdmin
from replication.kafka.topic_sync import TopicMetadataSync
from replication.policy import classify_topic, replication_policy_for

FLOW = FlowConfig(source="A", target="B", enabled=True, topics=("orders.*", "payments"))
POLICY = replication_policy_for(FLOW, known_aliases=("A", "B"))


def _mirrored(*topics: str):
    topic_filter = TopicFilter.for_flow(FLOW)
    return [classify_topic(topic=t, flow=FLOW, policy=POLICY, topic_filter=topic_filter) for t in topics]


def acl(topic, operation, permission="ALLOW", *, principal="User:alice", pattern="LITERAL", host="*"):
    return TopicAcl(topic, pattern, principal, host, operation, permission)


def test_allow_write_is_not_copied_allow_all_becomes_read_deny_is_kept():
    source = [
        acl("orders", "WRITE"),
        acl("orders", "READ", principal="User:bob"),
        acl("orders", "ALL", principal="User:carol"),
        acl("orders", "DESCRIBE"),
        acl("orders", "WRITE", "DENY", principal="User:mallory"),
        acl("orders", "ALL", "DENY", principal="User:eve", host="10.0.0.1"),
    ]
    assert plan_topic_acls(source, mirrored=_mirrored("orders")) == (
        acl("A.orders", "DESCRIBE"),
        acl("A.orders", "READ", principal="User:bob"),
        acl("A.orders", "READ", principal="User:carol"),
        acl("A.orders", "ALL", "DENY", principal="User:eve", host="10.0.0.1"),
        acl("A.orders", "WRITE", "DENY", principal="User:mallory"),
    )


def test_only_literal_acls_of_replicated_topics_are_copied():
    source = [
        acl("orders", "READ"),
        acl("orders", "READ", pattern="PREFIXED"),  # MM2 copies literal patterns only
        acl("other", "READ"),  # not replicated by the flow (topic filter)
        acl("__consumer_offsets", "READ"),  # internal: never replicated
        acl("payments", "READ"),  # not listed among the mirrored topics
    ]
    assert plan_topic_acls(source, mirrored=_mirrored("orders", "other", "__consumer_offsets")) == (
        acl("A.orders", "READ"),
    )


def test_identity_policy_keeps_names_and_existing_acls_are_not_created_again():
    flow = FLOW.replace(replication_policy_class="IdentityReplicationPolicy")
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    decision = classify_topic(
        topic="orders", flow=flow, policy=policy, topic_filter=TopicFilter.for_flow(flow)
    )
    wanted = plan_topic_acls([acl("orders", "ALL"), acl("orders", "READ")], mirrored=[decision])
    assert wanted == (acl("orders", "READ"),)  # ALL -> READ and READ are one ACL
    assert missing_acls(wanted, existing=[acl("orders", "READ")]) == ()
    assert missing_acls(wanted, existing=[]) == wanted


@pytest.mark.kafka
def test_embedded_broker_without_authorizer_is_reported_not_written(
    cluster_a, cluster_b, unique_name, caplog
):
    """The embedded broker (tansu) has no authorizer: no ACL is read or written (its CreateAcls reply
    would abort librdkafka), and the flow says so, naming each cluster."""
    admin = TopicAclAdmin(cluster_a)
    assert "no authorizer" in admin.unsupported_reason()
    with pytest.raises(AclSyncUnsupported):
        admin.topic_acls()

    flow = FlowConfig(source="A", target="B", enabled=True, topics=(f"{unique_name}.*",))
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    sync = TopicMetadataSync(flow=flow, source=cluster_a, target=cluster_b, policy=policy)
    with caplog.at_level(logging.DEBUG, logger="replication.kafka.topic_sync"):
        sync.tick(now=1000.0)
    assert sync.last_errors == ()
    assert sync.warnings == (
        "ACL sync unsupported by cluster A: it has no authorizer (DescribeCluster returns no authorized "
        "operations); topic ACLs are not synced",
        "ACL sync unsupported by cluster B: it has no authorizer (DescribeCluster returns no authorized "
        "operations); topic ACLs are not synced",
    )
    # warned once per process (replication.logonce): an earlier test may have logged it at WARNING
    assert any("ACL sync unsupported by cluster A" in r.getMessage() for r in caplog.records)

    disabled = TopicMetadataSync(
        flow=flow.replace(sync_topic_acls_enabled=False), source=cluster_a, target=cluster_b, policy=policy
    )
    disabled.tick(now=1000.0)
    assert disabled.warnings == ()
