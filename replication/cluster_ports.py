"""The control plane's ports to its clusters: one small Protocol per need, the errors they raise, and
`Clusters`, the one factory of them the control plane holds.

- `TopicReads`: a page's reads of one cluster's topics (their partitions, offsets by position and by
  time, records from offsets), every call within one deadline; and the topics' sizes on the brokers'
  disks (`Clusters.topic_sizes`);
- `ClusterDescriptions`: a cluster's and its topics' descriptions (brokers, version, replicas, configs), and
  `Clusters.check` ("Test connection"), `Clusters.probe` (asked again and again) and
  `Clusters.partition_counts`;
- `GroupAdmin`: consumer groups (list, describe, committed offsets) and the operators' actions on them
  (commit offsets, delete), on one cluster;
- `FlowClusters`: a flow's two clusters, for the operations (failover, failback, drain, drill, cutover)
  and the offset mapping: partitions, groups, MM2's internal topics, the groups' offset commits;
- `FlowRanges`: a flow's records compared range by range over its offset syncs (a cutover's verify step),
  and `FlowVerification`, the continuous verifier's runs and failover readiness observations;
- `Clusters.read_takeover_plan` and `Clusters.apply_takeover`: taking a flow over from a stopped MM2;

Two implementations: Apache Kafka (`replication.kafka.clusters.KAFKA`, the adapters of
`replication.kafka`) and an in-memory cluster (`replication.memory.clusters.MemoryClusters`, as
getsentry/arroyo ships a local broker), so the control plane's rules are tested without a broker and the
broker-backed tests prove the Kafka path. The control plane picks one with MIRRORPLANE_CLUSTERS
(`controlplane.flows.clusters.clusters`). Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from replication.browse import KafkaRecord, PartitionOffsets
from replication.checkpoint import CommittedOffset
from replication.config import ClusterConfig, FlowConfig
from replication.connector import TopicSelection
from replication.consumer_groups import GroupDescription, GroupListing
from replication.failover import UnreplicatedRecord
from replication.formats import Checkpoint
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import ReplicationPolicy
from replication.takeover import TakeoverPlan
from replication.verification import (
    ByteBudget,
    MirroredRecord,
    OffsetRange,
    PartitionEnds,
    PartitionOutcome,
    PartitionProgress,
    PartitionTurn,
    RangeVerdict,
    RunClock,
    VerificationLimits,
)

Key = tuple[str, int]  # (topic, partition)


class BrowseError(RuntimeError):
    """A read failed; `cut_short`: its call had less than half the reader's time left (the calls before it
    took the rest), so it says the reader ran out of time more than that the cluster does not answer."""

    cut_short = False


class UnknownTopic(BrowseError):
    pass


class GroupAdminError(RuntimeError):
    pass


class GroupNotEmpty(GroupAdminError):
    """The cluster refused to delete a group that has members."""


class TopicAdminError(RuntimeError):
    pass


class RangeNotReadable(RuntimeError):
    """The partition's readable end (high watermark, or last stable offset with read_committed) is still
    before the range's end: verify it later, it is not a mismatch. Apache Kafka's end is never before a
    replicated position; the embedded broker reports one too low by the size of its last batch - 1."""


class TakeoverError(RuntimeError):
    """MM2's state cannot be read or the positions not stored; `field` names the input to fix, if any."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class Mm2StillWriting(TakeoverError):
    """The remote partitions grew since the plan was read: MM2 (or something else) still writes there."""


class FailoverIOError(RuntimeError):
    pass


class DrillIOError(RuntimeError):
    pass


# What a cluster that does not answer raises from the ports (UnknownTopic is an answer).
UNAVAILABLE_ERRORS = (BrowseError, GroupAdminError, FailoverIOError, TopicAdminError)


@dataclass(frozen=True)
class TopicListing:
    name: str
    partitions: int


@dataclass(frozen=True)
class RecordPage:
    records: list[KafkaRecord]
    complete: bool  # False: the deadline (or `max_kept`) came before the partition's end or `max_records`
    scanned: int = 0  # records read (kept or not)
    position: int | None = None  # the offset after the last record read (None: none was)


class SizesUnread(RuntimeError):
    """Why a topic's size was not read, in words for the page."""


@dataclass(frozen=True)
class ReplicaSize:
    broker: int
    size_bytes: int  # the replica's log segments on that broker's disk
    offset_lag: int  # how far the replica's log end is behind the high watermark (0 on the leader)


@dataclass(frozen=True)
class PartitionSize:
    partition: int
    leader: int
    replicas: tuple[ReplicaSize, ...]  # the brokers that reported a log of it, by broker id

    @property
    def leader_bytes(self) -> int | None:
        """The leader's log, or None when the leader reported none (no leader, not asked, or moving)."""
        return next((r.size_bytes for r in self.replicas if r.broker == self.leader), None)

    @property
    def total_bytes(self) -> int:
        return sum(r.size_bytes for r in self.replicas)


@dataclass(frozen=True)
class TopicSizes:
    topic: str
    partitions: tuple[PartitionSize, ...]  # by partition number
    # brokers asked for that the cluster's metadata does not list (offline): their replicas are not counted
    unreported_brokers: tuple[int, ...] = ()

    @property
    def total_bytes(self) -> int:
        """Every replica's log: the topic's cost on the cluster's disks."""
        return sum(p.total_bytes for p in self.partitions)

    @property
    def leader_bytes(self) -> int:
        """Each partition's leader's log: the size of one copy of the topic."""
        return sum(p.leader_bytes or 0 for p in self.partitions)

    def partition(self, number: int) -> PartitionSize | None:
        return next((p for p in self.partitions if p.partition == number), None)


class FailureKind(StrEnum):
    DNS = "dns"
    REFUSED = "refused"
    AUTH = "auth"
    TLS = "tls"
    TIMEOUT = "timeout"
    OTHER = "other"


@dataclass(frozen=True)
class ClusterCheck:
    ok: bool
    brokers: int | None = None
    topic_count: int | None = None
    latency_ms: float | None = None
    failure: FailureKind | None = None
    message: str = ""


@dataclass(frozen=True)
class Broker:
    id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[Broker, ...]
    kafka_version: str | None  # the release line (4.1), or inter.broker.protocol.version; None when unread
    version_detail: str  # where kafka_version comes from, or why there is none


@dataclass(frozen=True)
class PartitionReplicas:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    in_sync: tuple[int, ...]


@dataclass(frozen=True)
class TopicConfig:
    name: str
    value: str | None  # None: sensitive, not shown by the broker
    source: str  # where the value comes from (_SOURCE_LABELS)
    is_default: bool


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionReplicas, ...]
    configs: tuple[TopicConfig, ...]  # every config, sorted by name
    overrides: dict[str, str]  # the configs set on the topic itself, as config sync reads them

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def under_replicated(self) -> int:
        return sum(1 for p in self.partitions if len(p.in_sync) < len(p.replicas))

    def config(self, name: str) -> str | None:
        return next((c.value for c in self.configs if c.name == name), None)


class TopicReads(Protocol):
    """Reads one cluster's topics, all its calls within one deadline from its creation (a web request's
    reads share one); errors are `BrowseError` naming the cluster, an unknown topic `UnknownTopic`."""

    cluster: ClusterConfig

    @property
    def timeout_s(self) -> float:
        """The bound of the next call: what is left of the deadline."""

    def topics(self) -> list[TopicListing]: ...

    def partition_count(self, topic: str) -> int: ...

    def earliest_offsets(self, partitions: Iterable[Key]) -> dict[Key, int]: ...

    def end_offsets(self, partitions: Iterable[Key]) -> dict[Key, int]: ...

    def offsets_at(self, partitions: Iterable[Key], timestamp_ms: int) -> dict[Key, int]:
        """Each partition's first offset whose timestamp is at or after the moment (-1: none is)."""

    def partition_offsets(self, topic: str) -> list[PartitionOffsets]:
        """Each partition's earliest offset and end offset (the high watermark): what the partition holds
        as a fetch finds it, never a listed end below it (`PartitionOffsets.listed_end` says when the
        broker listed one)."""

    def read(
        self, topic: str, partition: int, *, start: int, max_records: int, stop_before: int | None = None
    ) -> RecordPage:
        """At most `max_records` records of the partition from offset `start` (before `stop_before` when
        given); fewer when the partition ends first."""

    def read_many(
        self,
        starts: Mapping[Key, int],
        *,
        max_records: int,
        stop_before: Mapping[Key, int] | None = None,
        keep: Callable[[KafkaRecord], bool] | None = None,
        max_kept: int | None = None,
    ) -> dict[Key, RecordPage]:
        """Up to `max_records` records per partition from each start offset (an offset below the log start
        reads from it); a partition is done at its end, at `stop_before`, or when it has read `max_records`.
        With `keep`, only the records it keeps are returned (a search), and every partition stops once
        `max_kept` are kept in all."""


class ClusterDescriptions(TopicReads, Protocol):
    """A cluster's and its topics' descriptions, for the cluster and topic pages (within one deadline, as
    `TopicReads`)."""

    def cluster_id(self) -> str | None:
        """The id the brokers report."""

    def describe_cluster(self) -> ClusterInfo: ...

    def describe_topic(self, topic: str) -> TopicInfo:
        """Its partitions' replicas and every config; `UnknownTopic` when the cluster has none of that name."""


class GroupAdmin(Protocol):
    """Consumer groups of one cluster; errors are `GroupAdminError` naming the cluster and the reason."""

    def list_groups(self) -> list[str]: ...

    def list_group_states(self) -> list[GroupListing]:
        """Every group the cluster knows, with its state as the listing reports it."""

    def describe(self, groups: Sequence[str]) -> dict[str, GroupDescription]:
        """Each group's state and members with their assignments (ABSENT: unknown)."""

    def committed_offsets(self, group: str) -> dict[Key, CommittedOffset]:
        """The group's committed offsets; a group with none (or deleted meanwhile) has an empty dict."""

    def committed_offsets_of(self, groups: Sequence[str]) -> dict[str, dict[Key, CommittedOffset]]: ...

    def alter_offsets(self, group: str, offsets: Mapping[Key, int]) -> dict[Key, str]:
        """Commit `offsets`; the partitions the cluster refuses (e.g. the group became active), with why."""

    def delete_group(self, group: str) -> None:
        """Delete `group` (its committed offsets); a group already gone is fine. `GroupNotEmpty` while it
        has members, else `GroupAdminError`."""

    def newest_checkpoints(
        self, topic: str, *, group: str
    ) -> tuple[dict[Key, tuple[Checkpoint, int | None]], bool]:
        """The newest checkpoint of `group` per remote partition in the checkpoints topic `topic` (MM2's, on
        this cluster: the flow's target), each with its record's timestamp (ms); and whether the read
        reached the topic's end."""


class FlowClusters(Protocol):
    """A flow's two clusters, for its failover, failback, drain, drill, cutover and offset mapping: what
    they hold of the flow's partitions, groups and MM2 internal topics, and the groups' offset commits.
    Errors are `FailoverIOError` naming the cluster; `replication.failover_reads` reads plans through it."""

    flow: FlowConfig
    source: ClusterConfig
    target: ClusterConfig
    timeout_s: float
    policy: ReplicationPolicy
    topics: TopicSelection
    store: OffsetSyncStore  # the offset syncs read so far

    def reachable(self, cluster: ClusterConfig) -> tuple[bool, str]:
        """Whether `cluster` answers, and what it said (or why not)."""

    def partition_counts(self, cluster: ClusterConfig) -> dict[str, int]: ...

    def replicated_partitions(self) -> dict[Key, str]:
        """Every source partition the flow replicates -> its remote topic."""

    def end_offsets(self, cluster: ClusterConfig, partitions: Iterable[Key]) -> dict[Key, int]:
        """The end offset of every partition (partitions in error left out)."""

    def source_groups(self) -> list[str]:
        """The source's consumer groups the flow's groups / groups.exclude select."""

    def committed_offsets(
        self, cluster: ClusterConfig, groups: Sequence[str]
    ) -> dict[str, dict[Key, CommittedOffset]]: ...

    def group_states(self, cluster: ClusterConfig, groups: Sequence[str]) -> dict[str, str]:
        """Kafka's state name of every group (ABSENT when unknown there)."""

    def alter_offsets(self, cluster: ClusterConfig, group: str, offsets: Mapping[Key, int]) -> dict[Key, str]:
        """Commit `offsets` for `group`; the partitions refused, with the cluster's reason."""

    def offset_syncs_readable(self, *, source_reachable: bool) -> bool: ...

    def refresh_offset_syncs(self) -> OffsetSyncStore:
        """The offset syncs written since the last call, added to `store` (all of them the first time)."""

    @property
    def offset_syncs_complete(self) -> bool:
        """The last `refresh_offset_syncs` read the offset-syncs topic to its end within the timeout."""

    def latest_checkpoints(self, groups: Sequence[str] | None) -> dict[str, dict[Key, Checkpoint]]:
        """The newest checkpoint per remote partition of each group (all groups when None)."""

    def newest_heartbeat_ms(self) -> int | None:
        """Timestamp of the newest heartbeat this flow wrote to the target (None when none is found)."""

    def first_unreplicated(
        self, starts: Mapping[Key, int | None]
    ) -> tuple[dict[Key, UnreplicatedRecord], set[Key]]:
        """The first record at or after each start offset (None: from the beginning), read as the mirror
        reads (read_committed); (records found, partitions not settled within the timeout)."""

    def next_records(
        self,
        cluster: ClusterConfig,
        *,
        starts: Mapping[Key, int] | None = None,
        group: str | None = None,
        partitions: list[Key] | None = None,
        wait_for: AbstractSet[Key] = frozenset(),
        timeout_s: float | None = None,
        tick: Callable[[], None] = lambda: None,
    ) -> dict[Key, MirroredRecord | None]:
        """A drill's reads: the first record at or after each start offset (or, with `group`, each
        committed offset of the group on `partitions`), None where the partition ends there, read as a
        consumer of it would (read_committed). Partitions in `wait_for` are not settled by their end:
        their record is awaited until `timeout_s` (None: the reader's). `tick` runs at every poll (a
        lease). Nothing is committed; `DrillIOError` when a partition is not read in time."""

    def close(self) -> None: ...


class FlowRanges(Protocol):
    """A flow's records compared range by range, source against target over its offset syncs (a
    cutover's `verify` step); every read bounded by the timeout it was made with."""

    store: OffsetSyncStore  # the offset syncs read so far

    def refresh_syncs(self) -> None:
        """Add the offset syncs written since the last call to `store` (all of them the first time)."""

    def partition_ends(self, partitions: Sequence[tuple[str, int, str]]) -> dict[Key, PartitionEnds]:
        """Every (topic, partition, remote topic)'s source log start and readable end and its remote
        partition's readable end, in a few batched requests; a partition the source does not list is
        left out."""

    def verify_range(
        self,
        topic: str,
        partition: int,
        remote_topic: str,
        offsets: OffsetRange,
        *,
        limits: VerificationLimits,
        target_start: int | None = None,
    ) -> RangeVerdict:
        """The verdict on the source records of `offsets` and their copies; `RangeNotReadable` or
        TimeoutError when either side cannot be read whole yet (not a mismatch)."""

    def close(self) -> None: ...


class FlowVerification(FlowRanges, Protocol):
    """A flow's continuous verification (kept per flow by a worker: its offset syncs read incrementally)
    and what its failover readiness score observes."""

    def partition_turn(
        self,
        *,
        topic: str,
        partition: int,
        remote_topic: str,
        progress: PartitionProgress,
        replicated_position: int | None,
        ends: PartitionEnds,
        limits: VerificationLimits,
        seed: int,
    ) -> PartitionTurn | PartitionOutcome:
        """The partition's turn in this run, or its outcome as it stands when it has nothing new."""

    def verify(
        self,
        turns: Sequence[PartitionTurn],
        *,
        limits: VerificationLimits,
        budget: ByteBudget,
        clock: RunClock,
        batch_partitions: int,
    ) -> None:
        """Verify the turns in order, `batch_partitions` at a time, while the budget and the clock allow."""

    def groups_active_on_target(self) -> list[str]:
        """Groups the flow replicates that have members on the target (their offsets cannot be written)."""

    def topic_parity(self) -> tuple[list[str], list[str]]:
        """(partition problems, config problems) of the remote topics, as the topic sync would fix them."""


class ClusterProbe(Protocol):
    """One cluster asked again and again whether it answers, through a client kept between calls (cheap
    while it answers); when it does not, the precise reason (as `Clusters.check`)."""

    def check(self) -> ClusterCheck: ...


class Clusters(Protocol):
    """The control plane's way to its clusters: a port per need, for a cluster as the engine describes it."""

    def topic_reads(self, cluster: ClusterConfig, *, timeout_s: float) -> TopicReads: ...

    def cluster_descriptions(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterDescriptions: ...

    def partition_counts(self, cluster: ClusterConfig, *, timeout_s: float) -> dict[str, int]:
        """Every topic and its partition count (topics being deleted or erroring left out);
        `TopicAdminError` when the cluster does not answer."""

    def check(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterCheck:
        """Connect to `cluster` and report what it answers, or the precise reason it does not
        ("Test connection")."""

    def probe(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterProbe:
        """A probe of `cluster` to keep (a worker's circuit breaker asks it before a flow's metadata work)."""

    def group_admin(self, cluster: ClusterConfig, *, timeout_s: float | None = None) -> GroupAdmin:
        """`cluster`'s groups, each request bounded by `timeout_s` (None: the implementation's own)."""

    def topic_sizes(
        self,
        cluster: ClusterConfig,
        *,
        leaders: Mapping[str, Mapping[int, int]] | None,
        brokers: Iterable[int] | None,
        timeout_s: float,
    ) -> dict[str, TopicSizes]:
        """The size of every replica that `brokers` (None: every broker) hold of the topics in `leaders`
        (topic -> partition -> its leader; None: every topic), by topic; `SizesUnread` says why not."""

    def flow_clusters(
        self,
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        timeout_s: float | None = None,
    ) -> FlowClusters:
        """The flow's clusters, each request bounded by `timeout_s` (None: the implementation's own)."""

    def flow_verifier(
        self,
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        timeout_s: float,
        schema_ids: Callable[[], Mapping[int, int] | None] | None = None,
    ) -> FlowVerification:
        """The flow's verification; `schema_ids`: the flow's source -> target schema IDs, None when
        its copies keep the source's IDs (read at each comparison)."""

    def read_takeover_plan(
        self,
        flow: FlowConfig,
        *,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        offsets_topic: str | None,
        connector: str,
        mm2_source_alias: str | None,
        timeout_s: float,
        progress: Callable[[int, int], None],
    ) -> TakeoverPlan:
        """The dry run of taking `flow` over from a stopped MM2 (`replication.takeover_reads`): reads only;
        `TakeoverError` (its `field` the input to fix, if any) when MM2's state cannot be read."""

    def apply_takeover(
        self, plan: TakeoverPlan, *, target: ClusterConfig, source_alias: str, timeout_s: float
    ) -> dict[Key, int]:
        """Store the plan's positions (the ones replaced are put back if the write fails); returns them.
        `Mm2StillWriting` when the remote partitions grew since the plan was read."""

    def unreachable(self, cluster: ClusterConfig, *, timeout_s: float) -> str | None:
        """Why the cluster cannot be reached at all (its bootstrap servers refuse a connection), or None;
        quick: a cluster that answered nothing for a while is asked this before a read."""

    def is_cluster_failure(self, exc: BaseException) -> bool:
        """Whether `exc` (raised by a port) says the cluster did not answer or refused our credentials,
        rather than answered the request with an error (an invalid offset, a missing group)."""
