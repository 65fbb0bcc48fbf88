"""Which subjects a flow syncs and the names they get on the target.

Subjects named after a topic (the serializers' default TopicNameStrategy: `<topic>-key`, `<topic>-value`)
follow their topic: under the default policy subject `orders-value` of cluster `A` becomes
`A.orders-value`, the subject of remote topic `A.orders`. Other subjects (RecordNameStrategy's record
names) are not tied to a topic and keep their name. A subject is synced when it passes the flow's subject
filter (`schemas.subjects` / `schemas.subjects.exclude`, Java regular expressions as MM2's topic lists) and,
for a topic's subject, when the flow replicates that topic and it is not a cycle (a subject of a topic that
came from the target goes no further back, as the topic does not).
"""

from __future__ import annotations

from collections.abc import Callable

from replication.filters import SubjectFilter
from replication.policy import ReplicationPolicy, is_cycle

TOPIC_SUBJECT_SUFFIXES = ("-key", "-value")


def subject_topic(subject: str) -> tuple[str, str] | None:
    """(topic, suffix) of a topic's subject (TopicNameStrategy); None for any other subject."""
    for suffix in TOPIC_SUBJECT_SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)], suffix
    return None


def subject_renamer(
    *,
    policy: ReplicationPolicy,
    source_alias: str,
    target_alias: str,
    subject_filter: SubjectFilter,
    topic_replicated: Callable[[str], bool],
) -> Callable[[str], str | None]:
    """subject -> its name on the target, or None when the flow does not sync it."""

    def rename(subject: str) -> str | None:
        if not subject_filter.should_sync_subject(subject):
            return None
        of_topic = subject_topic(subject)
        if of_topic is None:
            return subject
        topic, suffix = of_topic
        if not topic_replicated(topic) or is_cycle(policy, topic, target_alias=target_alias):
            return None
        return policy.format_remote_topic(source_alias, topic) + suffix

    return rename
