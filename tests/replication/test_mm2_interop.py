"""Apache Kafka's own MirrorMaker 2 beside Mirrorplane on the session's Apache Kafka clusters: a flow taken
over from a running MM2 under traffic, as docs/migration.md says, copies no record twice and skips none;
MM2's own client reads the checkpoints Mirrorplane writes as the offsets Mirrorplane gives."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import TopicPartition

from replication.config import ClusterConfig, FlowConfig
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.mirrormaker import MirrorMaker2, mm2_translate_offsets
from replication.kafka.remote import latest_group_checkpoints
from replication.kafka.takeover_io import apply_takeover, read_takeover_plan
from replication.policy import DefaultReplicationPolicy
from tests.replication.test_run_cli import (
    RunProcess,
    create_topic,
    produce_records,
    read_partitions,
    write_mm2,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 2


class Traffic(threading.Thread):
    """Records `<partition>-<n>` produced to each partition in turn until stopped; `sent` says how many."""

    def __init__(self, cluster: ClusterConfig, topic: str, *, per_second: float) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic, self.pause_s = cluster, topic, 1 / per_second
        self.sent = dict.fromkeys(range(PARTITIONS), 0)
        self.stop_requested = threading.Event()

    def run(self) -> None:
        producer = make_producer(self.cluster)
        index = 0
        while not self.stop_requested.is_set():
            partition = index % PARTITIONS
            producer.produce(
                self.topic, value=f"{partition}-{self.sent[partition]}".encode(), partition=partition
            )
            self.sent[partition] += 1
            index += 1
            producer.poll(0)
            self.stop_requested.wait(self.pause_s)
        assert producer.flush(30) == 0

    def stop(self) -> dict[int, int]:
        self.stop_requested.set()
        self.join(60)
        return dict(self.sent)


def remote_records(cluster: ClusterConfig, topic: str) -> int:
    consumer = make_consumer(cluster)
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        )
    except Exception:  # the remote topic is not there yet
        return 0
    finally:
        consumer.close()


@pytest.mark.parametrize("crash", [False, True], ids=["mm2-stopped", "mm2-killed"])
def test_a_flow_taken_over_from_a_running_mm2_under_traffic_has_no_duplicate_and_no_gap(
    cluster_a, cluster_b, unique_name, tmp_path, crash
):
    tag = uuid.uuid4().hex[:8]
    source = ClusterConfig(alias=f"s{tag}", bootstrap_servers=cluster_a.bootstrap_servers)
    target = ClusterConfig(alias=f"t{tag}", bootstrap_servers=cluster_b.bootstrap_servers)
    flow_name = f"{source.alias}->{target.alias}"
    topic, remote = unique_name, f"{source.alias}.{unique_name}"
    create_topic(cluster_a, topic, PARTITIONS)
    flow = FlowConfig(source=source.alias, target=target.alias, enabled=True, topics=(topic,))
    aliases = [source.alias, target.alias]
    mm2 = MirrorMaker2(
        tmp_path / "mm2",
        {
            "clusters": f"{source.alias}, {target.alias}",
            f"{source.alias}.bootstrap.servers": source.bootstrap_servers,
            f"{target.alias}.bootstrap.servers": target.bootstrap_servers,
            f"{flow_name}.enabled": "true",
            f"{flow_name}.topics": topic,
            "emit.heartbeats.enabled": "false",
            # A Connect worker setting: dedicated mode reads it only prefixed with the target cluster's
            # alias (MirrorMakerConfig.workerConfig); unprefixed, MM2 commits every 60 s (its default).
            f"{target.alias}.offset.flush.interval.ms": "2000",
        },
    )
    properties = write_mm2(
        tmp_path / "mirrorplane.properties",
        {source.alias: source, target.alias: target},
        [f"{flow_name}.enabled = true", f"{flow_name}.topics = {topic}", "emit.heartbeats.enabled = false"],
    )
    traffic = Traffic(cluster_a, topic, per_second=200)
    run = None
    try:
        traffic.start()
        mm2.start()

        # MM2 runs until it has copied records and committed its positions, as one that ran for a while.
        # (MM2 also replicates a `heartbeats` topic that earlier tests' flows left on the shared cluster A,
        # whatever the topic filter says: only this test's topic counts.)
        def own(positions) -> set:
            return {key for key in positions if key[0] == topic}

        deadline = time.monotonic() + 180
        while (
            remote_records(cluster_b, remote) < 400
            or len(
                own(read_takeover_plan(flow, source=source, target=target, known_aliases=aliases).positions())
            )
            < PARTITIONS
        ):
            assert mm2.running() and time.monotonic() < deadline, mm2.output()[-5000:]
            time.sleep(1)
        assert mm2.stop(kill=crash) is not None
        # MM2 stopped with traffic going on: the documented takeover (dry run, apply), then Mirrorplane runs.
        plan = read_takeover_plan(flow, source=source, target=target, known_aliases=aliases)
        assert plan.problems() == [] and own(plan.positions()) == {(topic, p) for p in range(PARTITIONS)}, (
            plan
        )
        positions = apply_takeover(plan, target=target, source_alias=source.alias)
        assert own(positions) == {(topic, p) for p in range(PARTITIONS)}

        run = RunProcess(properties)
        before = remote_records(cluster_b, remote)
        deadline = time.monotonic() + 60
        while remote_records(cluster_b, remote) <= before + 100:  # Mirrorplane copies while traffic goes on
            assert run.process.poll() is None and time.monotonic() < deadline, run.output()[-3000:]
            time.sleep(0.2)
        sent = traffic.stop()
        got = read_partitions(cluster_b, remote, partitions=PARTITIONS, expected=sum(sent.values()), run=run)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        traffic.stop()
        mm2.stop(kill=True)
        if run is not None:
            run.kill()
    for partition in range(PARTITIONS):
        values = [value.decode() for _, value, _, _ in got[partition]]
        expected = [f"{partition}-{n}" for n in range(sent[partition])]
        duplicates = len(values) - len(set(values))
        gaps = sorted(set(expected) - set(values))[:5]
        assert (duplicates, gaps) == (0, []), (partition, duplicates, gaps)
        assert values == expected


def checkpointed_flow(
    tmp_path, source: ClusterConfig, target: ClusterConfig, *, topic: str, groups: dict[str, dict[int, int]]
):
    """100 records in each source partition, 10 already in each remote one (translation is then a shift,
    not the identity), `groups` committed on the source; Mirrorplane's properties for the flow, checkpoints
    every second for the groups named `<topic>-...`."""
    create_topic(source, topic, PARTITIONS)
    produce_records(source, topic, partitions=PARTITIONS, count=200)
    remote = f"{source.alias}.{topic}"
    create_topic(target, remote, PARTITIONS)
    produce_records(target, remote, partitions=PARTITIONS, count=20, origin="before-")
    for group, offsets in groups.items():
        consumer = make_consumer(source, group_id=group)
        try:
            commit = [TopicPartition(topic, p, offset) for p, offset in offsets.items()]
            consumer.commit(offsets=commit, asynchronous=False)
        finally:
            consumer.close()
    flow_name = f"{source.alias}->{target.alias}"
    return write_mm2(
        tmp_path / "mirrorplane.properties",
        {source.alias: source, target.alias: target},
        [
            f"{flow_name}.enabled = true",
            f"{flow_name}.topics = {topic}",
            f"{flow_name}.groups = {topic}-.*",
            "emit.checkpoints.interval.seconds = 1",
            "refresh.groups.interval.seconds = 1",
            "emit.heartbeats.enabled = false",
        ],
    )


def test_mm2s_translate_offsets_reads_mirrorplanes_checkpoints_as_mirrorplane_translates(
    cluster_a, cluster_b, unique_name, tmp_path
):
    tag = uuid.uuid4().hex[:8]
    source = ClusterConfig(alias=f"s{tag}", bootstrap_servers=cluster_a.bootstrap_servers)
    target = ClusterConfig(alias=f"t{tag}", bootstrap_servers=cluster_b.bootstrap_servers)
    group, topic, remote = f"{unique_name}-g", unique_name, f"{source.alias}.{unique_name}"
    committed = {0: 37, 1: 58}
    properties = checkpointed_flow(tmp_path, source, target, topic=topic, groups={group: committed})
    policy = DefaultReplicationPolicy(known_aliases=[source.alias, target.alias])
    expected = {(remote, p): offset + 10 for p, offset in committed.items()}
    run = RunProcess(properties)
    try:
        deadline = time.monotonic() + 60
        while True:
            checkpoints = latest_group_checkpoints(
                target=target, source_alias=source.alias, group=group, policy=policy
            )
            ours = {key: checkpoint.downstream_offset for key, checkpoint in checkpoints.items()}
            if ours == expected:
                break
            assert run.process.poll() is None and time.monotonic() < deadline, (ours, run.output()[-3000:])
            time.sleep(0.5)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.kill()
    assert mm2_translate_offsets(target.bootstrap_servers, source_alias=source.alias, group=group) == ours


def test_mm2s_checkpoint_connector_on_mirrorplanes_offset_syncs_agrees_for_caught_up_groups(
    cluster_a, cluster_b, unique_name, tmp_path
):
    """MM2's MirrorCheckpointConnector fed only Mirrorplane's offset syncs: a caught-up group's checkpoint
    is the one Mirrorplane writes; a group behind gets MM2's lossy translation, never ahead of ours."""
    tag = uuid.uuid4().hex[:8]
    source = ClusterConfig(alias=f"s{tag}", bootstrap_servers=cluster_a.bootstrap_servers)
    target = ClusterConfig(alias=f"t{tag}", bootstrap_servers=cluster_b.bootstrap_servers)
    # MM2 sees the same source cluster under another alias: its checkpoints go to their own topic, and
    # the offset syncs it reads (named after the target) are Mirrorplane's.
    mm2_alias = f"x{tag}"
    topic = unique_name
    caught_up, behind = f"{unique_name}-end", f"{unique_name}-mid"
    properties = checkpointed_flow(
        tmp_path, source, target, topic=topic, groups={caught_up: {0: 100, 1: 100}, behind: {0: 37, 1: 58}}
    )
    policy = DefaultReplicationPolicy(known_aliases=[source.alias, target.alias])
    expected = {caught_up: {0: 110, 1: 110}, behind: {0: 47, 1: 68}}  # exact: the remote copy is 10 ahead

    def ours(group: str) -> dict[int, int]:
        checkpoints = latest_group_checkpoints(
            target=target, source_alias=source.alias, group=group, policy=policy
        )
        return {partition: checkpoint.downstream_offset for (_, partition), checkpoint in checkpoints.items()}

    run = RunProcess(properties)
    try:
        deadline = time.monotonic() + 60
        while any(ours(group) != offsets for group, offsets in expected.items()):
            assert run.process.poll() is None and time.monotonic() < deadline, run.output()[-3000:]
            time.sleep(0.5)
        assert run.stop() == 0, run.output()[-3000:]  # its last offset syncs are written at the stop
    finally:
        run.kill()

    mm2_flow = f"{mm2_alias}->{target.alias}"
    mm2 = MirrorMaker2(
        tmp_path / "mm2",
        {
            "clusters": f"{mm2_alias}, {target.alias}",
            f"{mm2_alias}.bootstrap.servers": source.bootstrap_servers,
            f"{target.alias}.bootstrap.servers": target.bootstrap_servers,
            f"{mm2_flow}.enabled": "true",
            f"{mm2_flow}.topics": topic,
            f"{mm2_flow}.groups": f"{unique_name}-.*",
            f"{mm2_flow}.consumer.auto.offset.reset": "latest",  # MM2 copies nothing, writes no sync
            "emit.heartbeats.enabled": "false",
        },
    ).start()
    mm2_policy = DefaultReplicationPolicy(known_aliases=[mm2_alias, target.alias])
    try:
        deadline = time.monotonic() + 180
        # Until the caught-up group's checkpoints are on the target, read them here (a JVM start per poll
        # of MM2's own client costs seconds); then MM2's client reads them.
        while (
            len(
                latest_group_checkpoints(
                    target=target, source_alias=mm2_alias, group=caught_up, policy=mm2_policy
                )
            )
            < PARTITIONS
        ):
            assert mm2.running() and time.monotonic() < deadline, mm2.output()[-5000:]
            time.sleep(0.5)
        while (
            len(
                theirs := mm2_translate_offsets(
                    target.bootstrap_servers, source_alias=mm2_alias, group=caught_up
                )
            )
            < PARTITIONS
        ):
            assert mm2.running() and time.monotonic() < deadline, mm2.output()[-5000:]
            time.sleep(2)
        theirs_behind = mm2_translate_offsets(target.bootstrap_servers, source_alias=mm2_alias, group=behind)
    finally:
        mm2.stop()
    assert remote_records(cluster_b, f"{mm2_alias}.{topic}") == 0
    assert {partition: offset for (_, partition), offset in theirs.items()} == expected[caught_up]
    behind_by_partition = {partition: offset for (_, partition), offset in theirs_behind.items()}
    assert all(behind_by_partition.get(p, 0) <= offset for p, offset in expected[behind].items()), (
        behind_by_partition
    )
