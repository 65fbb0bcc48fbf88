"""Reading a stopped MM2's state for a flow, and storing the resume points (see `replication.takeover`).

`read_takeover_plan` reads, with every request bounded by `timeout_s`: the Connect offsets topic (all its
partitions), the flow's offset-syncs topic, the checkpoints topic, the source partitions' offsets and the
remote partitions' last records; nothing is written (except that reading Mirrorplane's own positions
moves any still under their legacy name, as every reader of positions does: `replication.kafka.positions`). `apply_takeover` stores the plan's positions in
Mirrorplane's position topic: one write to one partition, after everything was read and checked; if that
write fails, the positions it replaced are written back (and the ones it added removed) before the error
is raised, so stored state is unchanged (unless the cluster refuses that too: the error then says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import KafkaException

from replication.config import ClusterConfig, FlowConfig, offset_syncs_cluster
from replication.connector import TopicSelection
from replication.formats import Checkpoint, OffsetSync
from replication.kafka.admin import TopicAdmin, TopicAdminError
from replication.kafka.cluster_check import check_cluster
from replication.kafka.internal_topics import InternalTopicError, InternalTopicReader
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import PartitionReader, PartitionReadError
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

TAKEOVER_TIMEOUT_S = 10.0


_CLIENT_ERRORS = (KafkaException, TopicAdminError, PartitionReadError, InternalTopicError)


class TakeoverError(RuntimeError):
    """MM2's state cannot be read or the positions not stored; `field` names the input to fix, if any."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def _read_topic(cluster: ClusterConfig, topic: str, *, decode, timeout_s: float, partition: int = 0, **kw):
    reader = InternalTopicReader(
        cluster, topic, decode=decode, batch=10_000, timeout_s=timeout_s, partition=partition, **kw
    )
    try:
        return reader.read_new(), reader.skipped_records
    finally:
        reader.close()


Progress = Callable[[int, int], None]


def _connect_offsets(
    target: ClusterConfig, topic: str, *, partitions: int, timeout_s: float, progress: Progress
) -> tuple[list[ConnectSourceOffset], int]:
    """Every record of the Connect offsets topic, partition by partition (a key stays in one partition,
    so the order that matters, a key's, is kept), and how many were not Connect source offsets.
    `progress(done, total)` is called before each partition and after the last."""
    records: list[ConnectSourceOffset] = []
    skipped = 0
    for partition in range(partitions):
        progress(partition, partitions)
        found, bad = _read_topic(
            target,
            topic,
            decode=parse_connect_offset,
            timeout_s=timeout_s,
            partition=partition,
            tombstones=True,
        )
        records.extend(found)
        skipped += bad
    progress(partitions, partitions)
    return records, skipped


def read_takeover_plan(flow: FlowConfig, **kwargs) -> TakeoverPlan:
    """The dry run of taking `flow` over from MM2 (read only; see `_read_plan` for the arguments). Any
    client failure is a TakeoverError."""
    try:
        return _read_plan(flow, **kwargs)
    except TakeoverError:
        raise
    except _CLIENT_ERRORS as exc:
        raise TakeoverError(f"MM2's state could not be read: {exc}") from exc


def _read_plan(
    flow: FlowConfig,
    *,
    source: ClusterConfig,
    target: ClusterConfig,
    known_aliases: Sequence[str],
    offsets_topic: str | None = None,
    connector: str = MM2_SOURCE_CONNECTOR,
    mm2_source_alias: str | None = None,
    timeout_s: float = TAKEOVER_TIMEOUT_S,
    progress: Progress = lambda done, total: None,
) -> TakeoverPlan:
    """`offsets_topic` is MM2's `offset.storage.topic` (default `mm2-offsets.<source>.internal`),
    `mm2_source_alias` the `cluster` MM2 wrote in its Connect offsets' keys (default: the flow's source);
    `progress(done, total)`: the Connect offsets topic's partitions read so far (its exceptions pass)."""
    offsets_topic = offsets_topic or mm2_offsets_topic(flow.source)
    policy = replication_policy_for(flow, known_aliases=known_aliases)
    for cluster in (target, source):  # a cluster that does not answer fails at once, with the reason
        check = check_cluster(cluster, timeout_s=timeout_s)
        if not check.ok:
            raise TakeoverError(f"cluster {cluster.alias} does not answer: {check.message}")
    try:
        target_counts = TopicAdmin(target, timeout_s=timeout_s).partition_counts()
        source_counts = TopicAdmin(source, timeout_s=timeout_s).partition_counts()
    except TopicAdminError as exc:
        raise TakeoverError(f"cannot list topics: {exc}") from exc
    if offsets_topic not in target_counts:
        raise TakeoverError(
            f"{offsets_topic} does not exist on cluster {target.alias}: give MM2's offset.storage.topic "
            f"(its Connect offsets topic on the target)",
            field="offsets_topic",
        )
    records, skipped = _connect_offsets(
        target, offsets_topic, partitions=target_counts[offsets_topic], timeout_s=timeout_s, progress=progress
    )
    committed = mm2_committed_offsets(
        records, source_alias=mm2_source_alias or flow.source, connector=connector
    )

    mirrored = TopicSelection.of(flow, policy).mirrored(source_counts)
    remote_of = {decision.topic: decision.remote_topic for decision in mirrored}
    keys = [(d.topic, p) for d in mirrored for p in range(source_counts[d.topic])]
    source_reader, target_reader = (
        PartitionReader(source, timeout_s=timeout_s),
        PartitionReader(target, timeout_s=timeout_s),
    )
    try:
        # True ends (the last record read), not listed high watermarks, which some brokers list too low.
        source_tails, failures = source_reader.tails(keys)
        remote_keys = [(remote_of[t], p) for t, p in keys if target_counts.get(remote_of[t], 0) > p]
        tails, tail_failures = target_reader.tails(remote_keys)
    finally:
        source_reader.close()
        target_reader.close()
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
    syncs, _ = _read_topic(syncs_cluster, syncs_topic, decode=OffsetSync.decode, timeout_s=timeout_s)
    checkpoints_topic = policy.checkpoints_topic(flow.source)
    checkpoints, _ = _read_topic(target, checkpoints_topic, decode=Checkpoint.decode, timeout_s=timeout_s)

    store = KafkaPositionStore(target, source_alias=flow.source)
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


class Mm2StillWriting(TakeoverError):
    """The remote partitions grew since the plan was read: MM2 (or something else) still writes there."""


def _check_target_still(plan: TakeoverPlan, *, target: ClusterConfig, timeout_s: float) -> None:
    """The remote partitions end where the plan read them, or Mm2StillWriting naming those that moved."""
    read_at = {
        (p.remote_topic, p.partition): p.target_end for p in plan.partitions if p.target_end is not None
    }
    reader = PartitionReader(target, timeout_s=timeout_s)
    try:
        tails, failures = reader.tails(list(read_at))
    finally:
        reader.close()
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
    plan: TakeoverPlan, *, target: ClusterConfig, source_alias: str, timeout_s: float = TAKEOVER_TIMEOUT_S
) -> dict[tuple[str, int], int]:
    """Store the plan's positions (what was stored before is put back if the write fails); returns them.
    Refused (Mm2StillWriting) when the remote partitions grew since the plan was read."""
    positions = plan.positions()
    try:
        _check_target_still(plan, target=target, timeout_s=timeout_s)
    except _CLIENT_ERRORS as exc:
        raise TakeoverError(f"the target's partitions could not be read again: {exc}") from exc
    store = KafkaPositionStore(target, source_alias=source_alias)
    try:
        try:
            before = store.load(flow=plan.flow, partitions=list(positions))
        except _CLIENT_ERRORS as exc:
            raise TakeoverError(f"the stored positions could not be read, nothing changed: {exc}") from exc
        try:
            store.save(flow=plan.flow, positions=positions)
        except Exception as exc:
            _restore(store, flow=plan.flow, before=before, written=list(positions), cause=exc)
        return positions
    finally:
        store.close()


def _restore(store: KafkaPositionStore, *, flow: str, before, written, cause: Exception) -> None:
    try:
        store.save(flow=flow, positions=before)
        store.forget(flow=flow, partitions=[key for key in written if key not in before])
    except Exception as exc:
        raise TakeoverError(
            f"storing the positions failed ({cause}) and putting the previous ones back failed too ({exc}): "
            f"check {store.topic} on cluster {store.target.alias} before resuming the flow"
        ) from cause
    raise TakeoverError(f"storing the positions failed, nothing changed: {cause}") from cause
