"""MM2's topic ACL sync rule (`sync.topic.acls.enabled`), pure: which ACLs a flow creates on the target.

MirrorSourceConnector.syncTopicAcls: the source's ACLs on topics (literal resource patterns only) of the
topics the flow replicates are copied onto their remote topic names, except ALLOW WRITE (only the mirror
writes to a remote topic); ALLOW ALL becomes ALLOW READ; DENY entries are kept as they are. ACLs are only
ever added on the target, never removed. The admin I/O is in `replication.kafka.acls`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from replication.policy import TopicDecision

LITERAL = "LITERAL"
ALLOW, DENY = "ALLOW", "DENY"
WRITE, ALL, READ = "WRITE", "ALL", "READ"


@dataclass(frozen=True, order=True)
class TopicAcl:
    """One ACL on a topic: the resource pattern (topic name, pattern type) and the entry, as names."""

    topic: str
    pattern_type: str  # LITERAL, PREFIXED, ...
    principal: str
    host: str
    operation: str  # READ, WRITE, ALL, DESCRIBE, ...
    permission: str  # ALLOW or DENY


def should_replicate_acl(acl: TopicAcl) -> bool:
    """MM2's shouldReplicateAcl: everything but ALLOW WRITE."""
    return not (acl.permission == ALLOW and acl.operation == WRITE)


def target_acl(acl: TopicAcl, *, remote_topic: str) -> TopicAcl:
    """MM2's targetAclBinding: the ACL on the remote topic, ALLOW ALL narrowed to ALLOW READ."""
    operation = READ if (acl.permission == ALLOW and acl.operation == ALL) else acl.operation
    return replace(acl, topic=remote_topic, pattern_type=LITERAL, operation=operation)


def plan_topic_acls(
    source_acls: Iterable[TopicAcl], *, mirrored: Iterable[TopicDecision]
) -> tuple[TopicAcl, ...]:
    """The ACLs the target must hold for the source's topic ACLs (sorted, no duplicates).

    `mirrored` are the flow's replicated topics with their remote names; ACLs of other topics and
    non-literal patterns (PREFIXED, MATCH) are not copied, as in MM2.
    """
    remote: Mapping[str, str] = {d.topic: d.remote_topic for d in mirrored if d.replicate and d.remote_topic}
    wanted = {
        target_acl(acl, remote_topic=remote[acl.topic])
        for acl in source_acls
        if acl.pattern_type == LITERAL and acl.topic in remote and should_replicate_acl(acl)
    }
    return tuple(sorted(wanted))


def missing_acls(wanted: Iterable[TopicAcl], *, existing: Iterable[TopicAcl]) -> tuple[TopicAcl, ...]:
    """The wanted ACLs the target does not hold yet (MM2 re-creates them all; creating is idempotent)."""
    present = set(existing)
    return tuple(acl for acl in wanted if acl not in present)


def acl_sync_unsupported_message(*, alias: str, reason: str) -> str:
    """The flow warning for a cluster that cannot take part in ACL sync (reported once)."""
    return f"ACL sync unsupported by cluster {alias}: {reason}; topic ACLs are not synced"
