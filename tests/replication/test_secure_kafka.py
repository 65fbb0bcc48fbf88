"""Clusters as production secures them: SASL_SSL with SCRAM-SHA-512, a CA the tests make, and Kafka's
StandardAuthorizer. Replication, MM2's topic ACL sync against a real authorizer, and the precise reason
when credentials or the CA are wrong."""

from __future__ import annotations

import pytest

from replication.acls import TopicAcl
from replication.config import DeliveryGuarantee, FlowConfig
from replication.kafka.acls import TopicAclAdmin
from replication.kafka.cluster_check import FailureKind, check_cluster
from replication.kafka.topic_sync import TopicMetadataSync
from replication.policy import replication_policy_for
from tests.replication.test_source_task import (
    content,
    create_topics,
    make_task,
    produce,
    read_partition,
    replicated,
    run_until,
    sample_records,
)

pytestmark = pytest.mark.kafka


def acl(topic: str, operation: str, principal: str, permission: str = "ALLOW") -> TopicAcl:
    return TopicAcl(topic, "LITERAL", principal, "*", operation, permission)


def test_replication_over_sasl_ssl_keeps_every_record(secure_clusters, unique_name):
    source, target = secure_clusters.config("A"), secure_clusters.config("B")
    topic = unique_name
    create_topics(source, [topic], 2)
    create_topics(target, [f"A.{topic}"], 2)
    sent = {p: sample_records(p, 300) for p in (0, 1)}
    produce(source, topic, sent)

    task = make_task(
        source, target, [topic], target=target, delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE
    )
    task.assign([(topic, 0), (topic, 1)])
    run_until(task, replicated(task, {(topic, 0): 300, (topic, 1): 300}))
    task.close()
    for partition, records in sent.items():
        got = content(read_partition(target, f"A.{topic}", partition))
        assert [(k, v, t) for k, v, _, t in got] == [(k, v, t) for k, v, _, t in records]


def test_exactly_once_as_a_principal_without_transactional_id_acls_says_what_to_grant(
    secure_clusters, unique_name
):
    """The target principal may write the remote topic (ALLOW WRITE, DESCRIBE) but holds nothing on the
    TransactionalId resources: the partition does not start, and the error names the grant or the switch."""
    source, admin_b = secure_clusters.config("A"), secure_clusters.config("B")
    target = secure_clusters.config("B", user="mirror")
    topic, remote = unique_name, f"A.{unique_name}"
    create_topics(source, [topic], 1)
    create_topics(admin_b, [remote], 1)
    TopicAclAdmin(admin_b).create([acl(remote, op, "User:mirror") for op in ("WRITE", "DESCRIBE", "READ")])
    produce(source, topic, {0: sample_records(0, 5)})
    task = make_task(
        source, target, [topic], target=target, delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE
    )
    task.assign([(topic, 0)])
    try:
        result = task.run_slice(max_seconds=1)
    finally:
        task.close()
    (error,) = [e for e in result.errors if e.kind == "start"]
    assert "initialising the transactions of A->B task 0 on B failed" in str(error)
    assert "TransactionalId" in str(error) and "exactly.once.transactions = false" in str(error)
    assert result.records == 0 and not read_partition(admin_b, remote, 0)


def test_topic_acls_sync_against_a_real_authorizer_by_mm2s_rules(secure_clusters, unique_name):
    """MM2's rule: every topic ACL but ALLOW WRITE is copied (only the mirror writes a remote topic);
    ALLOW ALL becomes ALLOW READ; DENY stays DENY. Checked on what the target's authorizer now holds."""
    source, target = secure_clusters.config("A"), secure_clusters.config("B")
    topic = f"orders-{unique_name}"
    create_topics(source, [topic], 1)
    on_source = [
        acl(topic, "WRITE", "User:writer"),
        acl(topic, "ALL", "User:everything"),
        acl(topic, "READ", "User:reader"),
        acl(topic, "READ", "User:banned", "DENY"),
    ]
    TopicAclAdmin(source).create(on_source)
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(topic,))
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    sync = TopicMetadataSync(flow=flow, source=source, target=target, policy=policy)

    sync.tick(now=1000.0)

    assert sync.last_errors == () and sync.warnings == ()
    remote = f"A.{topic}"
    on_target = sorted(a for a in TopicAclAdmin(target).topic_acls() if a.topic == remote)
    assert on_target == sorted(
        [
            acl(remote, "READ", "User:everything"),
            acl(remote, "READ", "User:reader"),
            acl(remote, "READ", "User:banned", "DENY"),
        ]
    )
    sync.tick(now=1000.0 + flow.sync_topic_acls_interval_seconds)  # nothing created twice
    assert sync.last_errors == ()
    assert len([a for a in TopicAclAdmin(target).topic_acls() if a.topic == remote]) == 3


def test_a_wrong_password_is_reported_naming_the_cluster_and_the_settings(secure_clusters):
    wrong = secure_clusters.config("B", user="mirror", password="not-the-password")
    check = check_cluster(wrong, timeout_s=5)
    assert not check.ok and check.failure is FailureKind.AUTH
    assert "cluster B" in check.message and "sasl.password" in check.message, check.message
    assert "not-the-password" not in check.message


def test_a_broker_certificate_from_another_ca_is_reported_naming_the_cluster_and_the_setting(
    secure_clusters, tmp_path
):
    from tests.tls import make_pki

    other_ca = make_pki(tmp_path).ca_pem
    config = secure_clusters.config("A")
    untrusted = config.__class__(
        alias="A",
        bootstrap_servers=config.bootstrap_servers,
        client={**config.client, "ssl.ca.pem": other_ca},
    )
    check = check_cluster(untrusted, timeout_s=5)
    assert not check.ok and check.failure is FailureKind.TLS
    assert "cluster A" in check.message and "ssl.ca.pem" in check.message, check.message
    assert check_cluster(config, timeout_s=5).ok


def test_acls_are_not_written_to_a_target_without_authorizer_and_the_flow_says_so(
    secure_clusters, cluster_b, unique_name
):
    """Apache Kafka without an authorizer lists no ACLs and refuses CreateAcls (SECURITY_DISABLED): the
    source's ACLs stay unsynced and the flow warns naming the target, rather than failing every tick."""
    source = secure_clusters.config("A")
    topic = f"orders-{unique_name}"
    create_topics(source, [topic], 1)
    TopicAclAdmin(source).create([acl(topic, "READ", "User:reader")])
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(topic,))
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    sync = TopicMetadataSync(flow=flow, source=source, target=cluster_b, policy=policy)

    sync.tick(now=1000.0)

    assert sync.last_errors == ()
    assert sync.warnings == (
        "ACL sync unsupported by cluster B: no authorizer is configured (SECURITY_DISABLED); "
        "topic ACLs are not synced",
    )
    disabled = TopicMetadataSync(
        flow=flow.replace(sync_topic_acls_enabled=False), source=source, target=cluster_b, policy=policy
    )
    disabled.tick(now=1000.0)
    assert disabled.warnings == ()
