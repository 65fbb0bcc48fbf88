"""MirrorSourceConnector's decisions, pure: task assignment and the topic metadata plan.

`assign_partitions` splits source partitions over `tasks.max` tasks the way MM2 does. `plan_topic_sync`
compares the source's topics with the target's and says which remote topics to create, which to grow and
which config properties to set or reset. It sets properties the source sets explicitly on the topic, when
they differ, and resets (deletes the target override of) a synced property the source stopped setting,
as MM2's incremental config sync does; `config_resets` says which. Excluded properties and overrides
set only on the target are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from replication.config import FlowConfig
from replication.filters import ConfigPropertyFilter, TopicFilter
from replication.policy import ReplicationPolicy, TopicDecision, classify_topic

TopicPartition = tuple[str, int]


def assign_partitions(partitions: Sequence[TopicPartition], tasks_max: int) -> list[list[TopicPartition]]:
    """MM2's assignment: tasks = min(tasks.max, partitions), round-robin over the sorted partitions.

    Deterministic, so every worker that computes it agrees on which task owns which partition.
    """
    ordered = sorted(set(partitions))
    task_count = min(max(tasks_max, 1), len(ordered))
    return [ordered[task_index::task_count] for task_index in range(task_count)]


@dataclass(frozen=True)
class TopicDescription:
    """A topic as the admin adapter sees it: partition count and the configs set on the topic itself."""

    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", MappingProxyType(dict(self.configs)))


@dataclass(frozen=True)
class NewRemoteTopic:
    name: str
    source_topic: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]


# Apache Kafka's KRaft controller refuses a whole CreateTopics request, creating nothing, that creates more
# than 10,000 partitions ("Excessively large number of partitions per request") or writes more than
# 10,000 metadata records ("Unable to perform excessively large batch operation"). A new topic writes one
# record, one per partition and one per config set on it; creation requests stay at half the bound, so a
# flow of 10,000-50,000 partitions is created in steps (and its first remote topics are served sooner).
CREATE_RECORDS_PER_REQUEST = 5_000


def creation_records(topic: NewRemoteTopic) -> int:
    """The metadata records creating `topic` writes on a KRaft controller."""
    return 1 + topic.partitions + len(topic.configs)


def creation_batches(
    topics: Iterable[NewRemoteTopic], *, records: int = CREATE_RECORDS_PER_REQUEST
) -> list[list[NewRemoteTopic]]:
    """`topics` in order, in requests of at most `records` metadata records each; a topic above it alone
    in its own (the broker then answers for that topic only)."""
    batches: list[list[NewRemoteTopic]] = []
    size = 0
    for topic in topics:
        cost = creation_records(topic)
        if not batches or size + cost > records:
            batches.append([])
            size = 0
        batches[-1].append(topic)
        size += cost
    return batches


@dataclass(frozen=True)
class PartitionGrowth:
    topic: str
    source_topic: str
    current: int
    desired: int


@dataclass(frozen=True)
class ConfigUpdate:
    """Properties to SET on a remote topic, and synced properties to reset (DELETE) back to the default."""

    topic: str
    source_topic: str
    changes: Mapping[str, str]
    resets: tuple[str, ...] = ()


@dataclass(frozen=True)
class TopicSyncPlan:
    mirrored: tuple[TopicDecision, ...]  # what `mirrored_topics` decided, with the remote names
    create: tuple[NewRemoteTopic, ...]
    grow: tuple[PartitionGrowth, ...]
    update_configs: tuple[ConfigUpdate, ...]
    warnings: tuple[str, ...]


def replicated_configs(configs: Mapping[str, str], *, config_filter: ConfigPropertyFilter) -> dict[str, str]:
    """The source topic's own configs minus `config.properties.exclude`."""
    return {
        name: value for name, value in configs.items() if config_filter.should_replicate_config_property(name)
    }


def config_resets(
    *, previous: Mapping[str, str] | None, current: Mapping[str, str], target: Mapping[str, str]
) -> tuple[str, ...]:
    """Synced properties the source went back to its default for: their target overrides are deleted.

    `previous` and `current` are the source topic's replicated configs (`replicated_configs`) at the
    last config sync and now (None: no earlier sync seen, nothing is reset). A property is reset when
    the source set it before, sets it no more, and the target still holds the value synced from the
    source. A property the source never set (a target-only override), an excluded one (absent from
    both) and one changed on the target since are left alone.
    """
    if previous is None:
        return ()
    return tuple(
        sorted(name for name, value in previous.items() if name not in current and target.get(name) == value)
    )


def clamp_replication_factor(*, requested: int, broker_count: int) -> tuple[int, str | None]:
    """A replication factor the target can satisfy, and a warning when it had to be lowered."""
    if broker_count <= 0 or requested <= broker_count:
        return requested, None
    return broker_count, (
        f"replication.factor={requested} exceeds the target's {broker_count} broker(s): "
        f"creating remote topics with replication factor {broker_count}"
    )


def mirrored_topics(
    source_topics: Iterable[str], *, flow: FlowConfig, policy: ReplicationPolicy, topic_filter: TopicFilter
) -> tuple[TopicDecision, ...]:
    """The decisions of the source topics this flow replicates (sorted by name)."""
    decisions = (
        classify_topic(topic=name, flow=flow, policy=policy, topic_filter=topic_filter)
        for name in sorted(source_topics)
    )
    return tuple(decision for decision in decisions if decision.replicate)


@dataclass(frozen=True)
class TopicSelection:
    """Which source topics a flow replicates, and under which remote names: the flow, its replication
    policy and its topic filter, decided once and passed down (as MM2's connector decides the topics and
    hands its tasks partitions). Every reader, writer and page that asks "does this flow replicate that
    topic?" asks one of these."""

    flow: FlowConfig
    policy: ReplicationPolicy
    topic_filter: TopicFilter

    @classmethod
    def of(cls, flow: FlowConfig, policy: ReplicationPolicy) -> TopicSelection:
        return cls(flow, policy, TopicFilter.for_flow(flow))

    def decide(self, topic: str) -> TopicDecision:
        """Whether the flow replicates source topic `topic`, its remote name, and why not."""
        return classify_topic(topic=topic, flow=self.flow, policy=self.policy, topic_filter=self.topic_filter)

    def mirrored(self, source_topics: Iterable[str]) -> tuple[TopicDecision, ...]:
        """The decisions of the source topics among `source_topics` the flow replicates (sorted by name)."""
        return mirrored_topics(
            source_topics, flow=self.flow, policy=self.policy, topic_filter=self.topic_filter
        )


def plan_topic_sync(
    *,
    mirrored: Sequence[TopicDecision],
    source_topics: Mapping[str, TopicDescription],
    target_topics: Mapping[str, TopicDescription],
    flow: FlowConfig,
    config_filter: ConfigPropertyFilter,
    target_broker_count: int,
    sync_configs: bool = True,
    previous_configs: Mapping[str, Mapping[str, str]] | None = None,
) -> TopicSyncPlan:
    """What to change on the target so every mirrored source topic has its remote topic.

    `source_topics` must describe every topic of `mirrored`; `target_topics` the remote topics that exist.

    New remote topics get the source's partition count and filtered configs; existing ones with fewer
    partitions are grown; with `sync_configs`, properties the source sets and the target lacks or holds
    at another value are set, and those the source stopped setting are reset (`config_resets`;
    `previous_configs` maps each source topic to its replicated configs at the last config sync).
    """
    replication_factor, factor_warning = clamp_replication_factor(
        requested=flow.replication_factor, broker_count=target_broker_count
    )
    create: list[NewRemoteTopic] = []
    grow: list[PartitionGrowth] = []
    update_configs: list[ConfigUpdate] = []
    for decision in mirrored:
        name, remote_name = decision.topic, decision.remote_topic
        if remote_name is None:  # not replicated: nothing to sync
            continue
        source = source_topics[name]
        wanted_configs = replicated_configs(source.configs, config_filter=config_filter)
        remote = target_topics.get(remote_name)
        if remote is None:
            create.append(
                NewRemoteTopic(
                    name=remote_name,
                    source_topic=name,
                    partitions=source.partitions,
                    replication_factor=replication_factor,
                    configs=wanted_configs,
                )
            )
            continue
        if remote.partitions < source.partitions:
            grow.append(
                PartitionGrowth(
                    topic=remote.name, source_topic=name, current=remote.partitions, desired=source.partitions
                )
            )
        changes = {key: value for key, value in wanted_configs.items() if remote.configs.get(key) != value}
        resets = config_resets(
            previous=(previous_configs or {}).get(name), current=wanted_configs, target=remote.configs
        )
        if sync_configs and (changes or resets):
            update_configs.append(
                ConfigUpdate(topic=remote.name, source_topic=name, changes=changes, resets=resets)
            )
    warnings = (factor_warning,) if create and factor_warning else ()
    return TopicSyncPlan(
        mirrored=tuple(mirrored),
        create=tuple(create),
        grow=tuple(grow),
        update_configs=tuple(update_configs),
        warnings=warnings,
    )


def replicated_partitions(
    plan: TopicSyncPlan,
    *,
    source_topics: Mapping[str, TopicDescription],
    remote_partitions: Mapping[str, int],
) -> list[TopicPartition]:
    """Source partitions that have somewhere to go: the remote topic exists with that partition.

    When the target could not grow a topic, the partitions it has keep replicating; the others wait.
    """
    partitions: list[TopicPartition] = []
    for decision in plan.mirrored:
        if decision.remote_topic is None:  # not replicated: nowhere to go
            continue
        available = min(
            source_topics[decision.topic].partitions, remote_partitions.get(decision.remote_topic, 0)
        )
        partitions.extend((decision.topic, partition) for partition in range(available))
    return partitions


class ConfigSyncAction(StrEnum):
    SET = "set"  # config sync sets the source's value on the remote topic
    CREATE = "set at creation"  # the remote topic does not exist: it is created with this value
    SAME = "same"  # both hold the source's value
    EXCLUDED = "excluded"  # config.properties.exclude: never synced
    TARGET_ONLY = "target only"  # an override only the target sets: config sync leaves it alone


@dataclass(frozen=True)
class ConfigSyncRow:
    name: str
    source: str | None  # the value set on the source topic (None: not set there)
    target: str | None  # the value set on the remote topic (None: not set there, or no remote topic)
    action: ConfigSyncAction


def config_sync_preview(
    *,
    decision: TopicDecision,
    source: TopicDescription,
    target: TopicDescription | None,
    flow: FlowConfig,
    config_filter: ConfigPropertyFilter,
) -> tuple[ConfigSyncRow, ...]:
    """What config sync does to one remote topic, property by property, by `plan_topic_sync`'s own rule:
    every property set on the source topic or on the remote topic (`target`, None when it does not exist
    yet), sorted by name. Resets are not shown: they depend on the source's configs at the previous sync,
    which only the running metadata task holds."""
    plan = plan_topic_sync(
        mirrored=(decision,),
        source_topics={decision.topic: source},
        target_topics={}
        if target is None or decision.remote_topic is None
        else {decision.remote_topic: target},
        flow=flow,
        config_filter=config_filter,
        target_broker_count=0,
    )
    changes = {name: value for update in plan.update_configs for name, value in update.changes.items()}
    created = {name: value for new in plan.create for name, value in new.configs.items()}
    target_configs = {} if target is None else target.configs
    rows = []
    for name in sorted(set(source.configs) | set(target_configs)):
        if name in created:
            action = ConfigSyncAction.CREATE
        elif name in changes:
            action = ConfigSyncAction.SET
        elif name in source.configs and not config_filter.should_replicate_config_property(name):
            action = ConfigSyncAction.EXCLUDED
        elif name in source.configs:
            action = ConfigSyncAction.SAME
        else:
            action = ConfigSyncAction.TARGET_ONLY
        rows.append(ConfigSyncRow(name, source.configs.get(name), target_configs.get(name), action))
    return tuple(rows)
