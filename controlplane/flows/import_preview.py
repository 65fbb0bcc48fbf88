"""An MM2 import's dry run, per imported flow: the topics its source holds now that it would mirror, under
which names, and which of them would come back to where they came from.

The topics are the flow's own decisions (`TopicSelection`: the policy and filters the engine runs, with
every alias stored or imported known). A loop is judged by what the clusters are, not their aliases: the
target goes by every alias whose bootstrap servers share a broker with its own or whose brokers report its
cluster id (`ClusterIdentity`, `engine.same_cluster_evidence`: the rule `mm2.same_cluster_errors`
refuses an import by), and a topic whose lineage names any of them
would be copied back (`replication.policy.returns_through`; MM2's alias-based cycle check sees only the
flow's own target alias). A flow whose source and target are one cluster loops on every topic.

Each source is read once, through `cluster_reads.configs_read` (bounded, behind its breaker), with the
moment it was read; a source that does not answer costs only its own flows' previews (their `problem`).
"""

from __future__ import annotations

import datetime
import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controlplane.core.errors import ClusterUnavailable, ServiceValidationError
from controlplane.flows import engine
from controlplane.flows.cluster_reads import configs_read, timed
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster
from replication.config import ClusterConfig, FlowConfig
from replication.connector import TopicSelection
from replication.policy import replication_policy_for, returns_through

MAX_TOPICS_SHOWN = 200  # per flow; the counts cover them all


@dataclass(frozen=True)
class PreviewTopic:
    topic: str
    remote_topic: str
    partitions: int
    loop: str | None  # why mirroring it copies it back, None when it does not


@dataclass(frozen=True)
class FlowPreview:
    flow: str
    enabled: bool
    read_at: datetime.datetime | None
    replicated: tuple[PreviewTopic, ...]  # at most MAX_TOPICS_SHOWN, loops first
    replicated_count: int
    loop_count: int
    not_replicated: Mapping[str, int]  # reason (filter, internal, cycle) -> topics
    same_cluster: str | None = None  # the flow's source and target are one cluster
    problem: str | None = None  # the source did not answer

    def to_dict(self) -> dict:
        return {
            "flow": self.flow,
            "enabled": self.enabled,
            "read_at": self.read_at.isoformat() if self.read_at else None,
            "replicated": [
                {"topic": t.topic, "remote_topic": t.remote_topic, "partitions": t.partitions, "loop": t.loop}
                for t in self.replicated
            ],
            "replicated_count": self.replicated_count,
            "loop_count": self.loop_count,
            "not_replicated": dict(self.not_replicated),
            "same_cluster": self.same_cluster,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class ClusterIdentity:
    """Every cluster an import knows (stored, and the file's, which win), with the cluster id its brokers
    report where they answered (DescribeCluster, read once per import)."""

    configs: Mapping[str, ClusterConfig]
    cluster_ids: Mapping[str, str]

    @classmethod
    def read(cls, *, imported: Sequence[ClusterConfig]) -> ClusterIdentity:
        """Asks each cluster whose hosts MIRRORPLANE_CLUSTER_HOSTS_ALLOWED allows for its id (bounded, behind
        its breaker); one that does not answer has none (the bootstrap servers still identify it)."""
        configs = {cluster.alias: engine.cluster_to_config(cluster) for cluster in Cluster.objects.all()}
        configs |= {config.alias: config for config in imported}
        ids = {}
        for alias, config in configs.items():
            if engine.bootstrap_servers_error(config.bootstrap_servers):
                continue
            try:
                cluster_id = configs_read(
                    [config],
                    lambda read, timeout_s: (
                        clusters().cluster_descriptions(read[0], timeout_s=timeout_s).cluster_id()
                    ),
                )
            except (ClusterUnavailable, ServiceValidationError):
                continue
            if cluster_id:
                ids[alias] = cluster_id
        return cls(configs, ids)

    def aliases_of(self, alias: str) -> set[str]:
        """Every alias of the cluster `alias` is (`engine.same_cluster_evidence`), itself included."""
        servers, cluster_id = self.configs[alias].bootstrap_servers, self.cluster_ids.get(alias)
        return {alias} | {
            other
            for other, config in self.configs.items()
            if engine.same_cluster_evidence(
                servers,
                config.bootstrap_servers,
                cluster_id=cluster_id,
                other_cluster_id=self.cluster_ids.get(other),
            )
        }


def _flow_preview(
    flow: FlowConfig,
    *,
    topics: dict[str, int],
    read_at: datetime.datetime,
    identity: ClusterIdentity,
) -> FlowPreview:
    policy = replication_policy_for(flow, known_aliases=identity.configs)
    selection = TopicSelection.of(flow, policy)
    target_aliases = identity.aliases_of(flow.target)
    same_cluster = None
    if flow.source in target_aliases:
        same_cluster = (
            f"{flow.source} and {flow.target} are one cluster (as their brokers say): the flow "
            "would copy every topic into the cluster it reads, and copy the copies again"
        )
    replicated: list[PreviewTopic] = []
    not_replicated: Counter[str] = Counter()
    for name, partitions in sorted(topics.items()):
        decision = selection.decide(name)
        if not decision.replicate or decision.remote_topic is None:  # a replicated topic has its name
            not_replicated[decision.reason or "filter"] += 1
            continue
        loop = None
        if same_cluster:
            loop = f"{flow.source} is {flow.target}"
        elif via := returns_through(policy, name, target_aliases=target_aliases - {flow.target}):
            loop = (
                f"{name} came from {via}, which is {flow.target} under another alias: mirroring it to "
                f"{flow.target} copies it back as {decision.remote_topic}"
            )
        replicated.append(PreviewTopic(name, decision.remote_topic, partitions, loop))
    replicated.sort(key=lambda t: t.loop is None)
    return FlowPreview(
        flow=flow.name,
        enabled=flow.enabled,
        read_at=read_at,
        replicated=tuple(replicated[:MAX_TOPICS_SHOWN]),
        replicated_count=len(replicated),
        loop_count=sum(1 for t in replicated if t.loop),
        not_replicated=dict(not_replicated),
        same_cluster=same_cluster,
    )


def _partition_counts(clusters_read: list[ClusterConfig], timeout_s: float) -> dict[str, int]:
    return clusters().partition_counts(clusters_read[0], timeout_s=timeout_s)


def import_preview(*, identity: ClusterIdentity, flows: Sequence[FlowConfig]) -> list[FlowPreview]:
    """The preview of each of `flows`, whose clusters `identity` knows."""
    listings: dict[str, tuple[dict[str, int], datetime.datetime] | str] = {}
    previews = []
    for flow in flows:
        if flow.source not in listings:
            try:
                source = identity.configs[flow.source]
                counts, read_at, _ = timed(functools.partial(configs_read, [source], _partition_counts))
                listings[flow.source] = (counts, read_at)
            except ClusterUnavailable as exc:
                listings[flow.source] = f"source {flow.source} did not answer: {exc}"
        listing = listings[flow.source]
        if isinstance(listing, str):
            previews.append(FlowPreview(flow.name, flow.enabled, None, (), 0, 0, {}, problem=listing))
            continue
        counts, read_at = listing
        previews.append(_flow_preview(flow, topics=counts, read_at=read_at, identity=identity))
    return previews
