"""MM2's topic ACL sync rule (pure) and a cluster without authorizer (reported once); against a real
authorizer: tests/replication/test_secure_kafka.py."""

from __future__ import annotations

from replication.acls import TopicAcl, missing_acls, plan_topic_acls
from replication.config import FlowConfig
from replication.filters import TopicFilter
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
