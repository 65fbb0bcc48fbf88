"""Reading a stopped MM2's state for a flow, and storing the resume points (see `replication.takeover`),
on any clusters: the steps, in order, over a `TakeoverIO` (`replication.kafka.takeover_io` on Apache
Kafka, `replication.memory.takeover` in memory). Pure: the reads and the writes are the IO's.

`read_takeover_plan` reads, with every request bounded by the IO's timeout: the Connect offsets topic
(all its partitions), the flow's offset-syncs topic, the checkpoints topic, the source partitions'
offsets and the remote partitions' last records; nothing is written. `apply_takeover` stores the plan's
positions in Mirrorplane's position topic: one write to one partition, after everything was read and
checked; if that write fails, the positions it replaced are written back (and the ones it added removed)
before the error is raised, so stored state is unchanged (unless the cluster refuses that too: the error
then says so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from replication.cluster_ports import ClusterCheck, Key, Mm2StillWriting, TakeoverError
from replication.config import ClusterConfig, FlowConfig, offset_syncs_cluster
from replication.connector import TopicSelection
from replication.formats import Checkpoint, OffsetSync
from replication.policy import replication_policy_for
from replication.takeover import (
    MM2_SOURCE_CONNECTOR,
    ConnectSourceOffset,
    PartitionFacts,
    TakeoverPlan,
    mm2_committed_offsets,
    mm2_offsets_topic,
    newest_syncs,
    parse_connect_offset,
    plan_takeover,
)
from replication.task_io import Tail

T = TypeVar("T")
Progress = Callable[[int, int], None]


class StoredPositions(Protocol):
    """Mirrorplane's positions of one source cluster's flows, on the target (`replication.positions`)."""

    topic: str
    target: ClusterConfig

    def load(self, *, flow: str, partitions: Sequence[Key]) -> dict[Key, int]: ...

    def save(self, *, flow: str, positions: Mapping[Key, int]) -> None: ...

    def forget(self, *, flow: str, partitions: Sequence[Key]) -> None: ...

    def close(self) -> None: ...


class TakeoverIO(Protocol):
    """What a takeover reads of a flow's clusters and where it stores positions, every request bounded by
    one timeout. A failure of the clusters raises one of `client_errors`."""

    client_errors: tuple[type[Exception], ...]

    def check(self, cluster: ClusterConfig) -> ClusterCheck: ...

    def partition_counts(self, cluster: ClusterConfig) -> dict[str, int]: ...

    def read_topic(
        self,
        cluster: ClusterConfig,
        topic: str,
        *,
        decode: Callable[[bytes, Any], T],  # its value is None only for a tombstone, with `tombstones`
        partition: int = 0,
        tombstones: bool = False,
    ) -> tuple[list[T], int]:
        """Every record of the partition, decoded (tombstones skipped unless `tombstones`), and how many
        did not decode (skipped)."""

    def tails(
        self, cluster: ClusterConfig, keys: Sequence[Key]
    ) -> tuple[dict[Key, Tail], dict[Key, Exception]]:
        """Each partition's log start, true end and last record, and the partitions that failed."""

    def positions(self, target: ClusterConfig, *, source_alias: str) -> StoredPositions: ...


def read_takeover_plan(io: TakeoverIO, flow: FlowConfig, **kwargs: Any) -> TakeoverPlan:
    """The dry run of taking `flow` over from MM2 (read only; see `_read_plan` for the arguments). Any
    client failure is a TakeoverError."""
    try:
        return _read_plan(io, flow, **kwargs)
    except TakeoverError:
        raise
    except io.client_errors as exc:
        raise TakeoverError(f"MM2's state could not be read: {exc}") from exc


def _connect_offsets(
    io: TakeoverIO, target: ClusterConfig, topic: str, *, partitions: int, progress: Progress
) -> tuple[list[ConnectSourceOffset], int]:
    """Every record of the Connect offsets topic, partition by partition (a key stays in one partition,
    so the order that matters, a key's, is kept), and how many were not Connect source offsets.
    `progress(done, total)` is called before each partition and after the last."""
    records: list[ConnectSourceOffset] = []
    skipped = 0
    for partition in range(partitions):
        progress(partition, partitions)
        found, bad = io.read_topic(
            target, topic, decode=parse_connect_offset, partition=partition, tombstones=True
        )
        records.extend(found)
        skipped += bad
    progress(partitions, partitions)
    return records, skipped


def _read_plan(
    io: TakeoverIO,
    flow: FlowConfig,
    *,
    source: ClusterConfig,
    target: ClusterConfig,
    known_aliases: Sequence[str],
    offsets_topic: str | None = None,
    connector: str = MM2_SOURCE_CONNECTOR,
    mm2_source_alias: str | None = None,
    progress: Progress = lambda done, total: None,
) -> TakeoverPlan:
    """`offsets_topic` is MM2's `offset.storage.topic` (default `mm2-offsets.<source>.internal`),
    `mm2_source_alias` the `cluster` MM2 wrote in its Connect offsets' keys (default: the flow's source);
    `progress(done, total)`: the Connect offsets topic's partitions read so far (its exceptions pass)."""
    offsets_topic = offsets_topic or mm2_offsets_topic(flow.source)
    policy = replication_policy_for(flow, known_aliases=known_aliases)
    for cluster in (target, source):  # a cluster that does not answer fails at once, with the reason
        check = io.check(cluster)
        if not check.ok:
            raise TakeoverError(f"cluster {cluster.alias} does not answer: {check.message}")
    try:
        target_counts = io.partition_counts(target)
        source_counts = io.partition_counts(source)
    except io.client_errors as exc:
        raise TakeoverError(f"cannot list topics: {exc}") from exc
    if offsets_topic not in target_counts:
        raise TakeoverError(
            f"{offsets_topic} does not exist on cluster {target.alias}: give MM2's offset.storage.topic "
            f"(its Connect offsets topic on the target)",
            field="offsets_topic",
        )
    records, skipped = _connect_offsets(
        io, target, offsets_topic, partitions=target_counts[offsets_topic], progress=progress
    )
    committed = mm2_committed_offsets(
        records, source_alias=mm2_source_alias or flow.source, connector=connector
    )

    mirrored = TopicSelection.of(flow, policy).mirrored(source_counts)
    # A replicated topic always has its remote name (`classify_topic`).
    remote_of = {d.topic: d.remote_topic for d in mirrored if d.remote_topic is not None}
    keys = [(topic, p) for topic in remote_of for p in range(source_counts[topic])]
    # True ends (the last record read), not listed high watermarks, which some brokers list too low.
    source_tails, failures = io.tails(source, keys)
    remote_keys = [(remote_of[t], p) for t, p in keys if target_counts.get(remote_of[t], 0) > p]
    tails, tail_failures = io.tails(target, remote_keys)
    if failures or tail_failures:
        first = next(iter({**failures, **tail_failures}.values()))
        raise TakeoverError(f"{len(failures) + len(tail_failures)} partitions could not be read: {first}")
    facts = []
    for topic, partition in keys:
        source_tail = source_tails[(topic, partition)]
        tail = tails.get((remote_of[topic], partition))
        facts.append(
            PartitionFacts(
                topic=topic,
                partition=partition,
                remote_topic=remote_of[topic],
                source_start=source_tail.low,
                source_end=source_tail.end,
                target_last_offset=None if tail is None or tail.last is None else tail.last[0],
                target_end=None if tail is None else tail.end,
            )
        )

    syncs_topic = policy.flow_offset_syncs_topic(flow)
    syncs_cluster = offset_syncs_cluster(flow, source=source, target=target)
    syncs, _ = io.read_topic(syncs_cluster, syncs_topic, decode=OffsetSync.decode)
    checkpoints_topic = policy.checkpoints_topic(flow.source)
    checkpoints, _ = io.read_topic(target, checkpoints_topic, decode=Checkpoint.decode)

    store = io.positions(target, source_alias=flow.source)
    try:
        current = store.load(flow=flow.name, partitions=keys)
    finally:
        store.close()
    return plan_takeover(
        flow=flow.name,
        facts=facts,
        committed=committed,
        syncs=newest_syncs(syncs),
        current=current,
        offsets_topic=offsets_topic,
        connector=connector,
        offset_syncs_topic=f"{syncs_topic} on {syncs_cluster.alias}",
        checkpoints_topic=checkpoints_topic,
        checkpoint_groups=len({c.group for c in checkpoints if c.topic in set(remote_of.values())}),
        skipped_records=skipped,
    )


def _check_target_still(io: TakeoverIO, plan: TakeoverPlan, *, target: ClusterConfig) -> None:
    """The remote partitions end where the plan read them, or Mm2StillWriting naming those that moved."""
    read_at = {
        (p.remote_topic, p.partition): p.target_end for p in plan.partitions if p.target_end is not None
    }
    tails, failures = io.tails(target, list(read_at))
    if failures:
        raise TakeoverError(
            f"the target's partitions could not be read again: {next(iter(failures.values()))}"
        )
    moved = [
        f"{topic}[{p}] {read_at[(topic, p)]} -> {tail.end}"
        for (topic, p), tail in tails.items()
        if tail.end != read_at[(topic, p)]
    ]
    if moved:
        raise Mm2StillWriting(
            f"the remote partitions grew while the plan was read ({', '.join(moved[:5])}"
            f"{', ...' if len(moved) > 5 else ''}): MM2 still runs (or another writer); stop it and try again"
        )


def apply_takeover(
    io: TakeoverIO, plan: TakeoverPlan, *, target: ClusterConfig, source_alias: str
) -> dict[Key, int]:
    """Store the plan's positions (what was stored before is put back if the write fails); returns them.
    Refused (Mm2StillWriting) when the remote partitions grew since the plan was read."""
    positions = plan.positions()
    try:
        _check_target_still(io, plan, target=target)
    except io.client_errors as exc:
        raise TakeoverError(f"the target's partitions could not be read again: {exc}") from exc
    store = io.positions(target, source_alias=source_alias)
    try:
        try:
            before = store.load(flow=plan.flow, partitions=list(positions))
        except io.client_errors as exc:
            raise TakeoverError(f"the stored positions could not be read, nothing changed: {exc}") from exc
        try:
            store.save(flow=plan.flow, positions=positions)
        except Exception as exc:
            _restore(store, flow=plan.flow, before=before, written=list(positions), cause=exc)
        return positions
    finally:
        store.close()


def _restore(
    store: StoredPositions, *, flow: str, before: dict[Key, int], written: list[Key], cause: Exception
) -> None:
    try:
        store.save(flow=flow, positions=before)
        store.forget(flow=flow, partitions=[key for key in written if key not in before])
    except Exception as exc:
        raise TakeoverError(
            f"storing the positions failed ({cause}) and putting the previous ones back failed too ({exc}): "
            f"check {store.topic} on cluster {store.target.alias} before resuming the flow"
        ) from cause
    raise TakeoverError(f"storing the positions failed, nothing changed: {cause}") from cause
