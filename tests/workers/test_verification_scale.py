"""Continuous verification at scale, on Apache Kafka and PostgreSQL: a run over 2,000 partitions sends a
few ListOffsets requests (counted by librdkafka's statistics), not one per partition, and stores its
outcome with a bounded number of statements in one upsert; a run with nothing new reads nothing and
writes no row. With a small budget, runs take the partitions in rotation, resume where the last one
stopped, store what they leave waiting (the flow's backlog), and find a mismatch planted late in the
rotation with its first bad offset."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench.verification import append_mirrored, seed_mirrored
from controlplane.assurance.models import PartitionVerification, VerificationBacklog
from controlplane.status import runtime
from controlplane.status.models import FlowEvent, FlowEventKind
from replication import verification_backlog
from workers import verification as worker

pytestmark = pytest.mark.kafka


class ListOffsetsCounter:
    """A librdkafka `stats_cb` keeping, per client, the ListOffsets requests it sent so far."""

    def __init__(self) -> None:
        self.by_client: dict[str, int] = {}

    def __call__(self, text: str) -> None:
        stats = json.loads(text)
        brokers = stats["brokers"].values()
        sent = sum(b.get("req", {}).get("ListOffsets", 0) for b in brokers if b.get("nodeid", -1) >= 0)
        self.by_client[stats["name"]] = sent

    @property
    def total(self) -> int:
        return sum(self.by_client.values())


def _counted(cluster, counter: ListOffsetsCounter):
    stats = {"statistics.interval.ms": 100, "stats_cb": counter}
    return dataclasses.replace(
        cluster, consumer={**cluster.consumer, **stats}, admin={**cluster.admin, **stats}
    )


def _serve_statistics(verifier) -> None:
    """librdkafka hands statistics over when a client is polled: poll each of the verifier's clients for
    a few intervals (nothing is assigned: nothing is fetched)."""
    for _ in range(5):
        for admin in (verifier._source_admin, verifier._target_admin):
            admin.poll(0.05)
        for reader in (verifier._source, verifier._target):
            reader._consumer.consume(timeout=0.05)
        verifier._syncs._consumer.consume(timeout=0.05)


@pytest.fixture
def verifier_cache():
    yield
    for _, verifier in worker._verifiers.values():
        verifier.close()
    worker._verifiers.clear()
    worker._observed.clear()


def _rows(flow) -> dict[tuple[str, int], PartitionVerification]:
    return {(r.topic, r.partition): r for r in PartitionVerification.objects.filter(flow=flow)}


def _upserts(queries) -> list[str]:
    return [
        q["sql"] for q in queries if q["sql"].startswith('INSERT INTO "controlplane_partitionverification"')
    ]


@pytest.mark.timeout(900)  # 4,000 partitions made and written on a loaded 2-core machine: minutes
def test_a_run_over_2000_partitions_sends_a_few_list_offsets_and_one_upsert(
    make_flow, cluster_a, cluster_b, unique_name, settings, monkeypatch, verifier_cache
):
    settings.VERIFY_RUN_BUDGET_S = 600  # every partition in this run: what is counted must not depend on load
    # Each read as long as it takes: a batch read past VERIFY_TIMEOUT_S (10 s) is put off to the next run, and
    # at load 30-40 the third run left some partitions at 3 ({3, 5} != {5}).
    settings.VERIFY_TIMEOUT_S = 300
    topics = [f"{unique_name}-{index}" for index in range(4)]
    flow = make_flow(topics=[f"{unique_name}-.*"])
    mirrored = seed_mirrored(
        flow=flow, source=cluster_a, target=cluster_b, topics=topics, partitions=500, records=3
    )
    counter = ListOffsetsCounter()
    (spec,) = runtime.runtime_flow_specs()
    counted = dataclasses.replace(
        spec, source=_counted(spec.source, counter), target=_counted(spec.target, counter)
    )
    monkeypatch.setattr(runtime, "runtime_flow_specs", lambda: [counted])
    monkeypatch.setattr(worker, "ASSURANCE_INTERVAL_S", 3600)  # its readiness observations: once, first
    # The flow's unchanged backlog is written again once a minute; runs here may be that far apart.
    monkeypatch.setattr(verification_backlog, "BACKLOG_REFRESH_S", 3600)

    def run() -> tuple[int, list]:
        with CaptureQueriesContext(connection) as queries:
            budget = worker.run_verification(run=0)
        _serve_statistics(worker._verifiers[flow.pk][1])
        return budget.spent, queries.captured_queries

    spent, queries = run()
    rows = _rows(flow)
    assert len(rows) == 2000 and spent > 0
    assert {(r.status, r.verified_from, r.verified_up_to) for r in rows.values()} == {("ok", 0, 3)}
    # Before: one ListOffsets per partition (its log start); now three per broker (both clusters have one).
    assert 3 <= counter.total <= 8, counter.by_client
    assert len(_upserts(queries)) == 1 and len(queries) <= 20, [q["sql"][:80] for q in queries]

    before = counter.total
    spent, queries = run()  # nothing new: the batched ends only, and no write nor lock
    assert spent == 0 and len(queries) <= 20
    assert all(q["sql"].startswith("SELECT") and "FOR UPDATE" not in q["sql"] for q in queries), queries
    assert counter.total - before <= 8, counter.by_client
    assert {r.checked_at for r in PartitionVerification.objects.filter(flow=flow)} == {
        r.checked_at for r in rows.values()
    }

    mirrored = append_mirrored(mirrored, flow=flow, source=cluster_a, target=cluster_b, records=2)
    before = counter.total
    spent, queries = run()
    assert spent > 0 and len(_upserts(queries)) == 1 and counter.total - before <= 8
    assert {r.verified_up_to for r in PartitionVerification.objects.filter(flow=flow)} == {5}


def test_runs_take_partitions_in_rotation_and_find_a_late_mismatch_by_its_first_bad_offset(
    make_flow, cluster_a, cluster_b, unique_name, settings, verifier_cache
):
    settings.VERIFY_RUN_BUDGET_S = 0  # one round of one batch per run
    settings.VERIFY_BATCH_PARTITIONS = 10
    topics = [f"{unique_name}-{index}" for index in range(2)]
    flow = make_flow(topics=[f"{unique_name}-.*"])
    late = (topics[1], 19)  # the last partition in the rotation: (topic, partition) order at first
    mirrored = seed_mirrored(
        flow=flow,
        source=cluster_a,
        target=cluster_b,
        topics=topics,
        partitions=20,
        records=6,
        altered=frozenset({(*late, 3), (*late, 4)}),
    )
    checked_by_run = []
    for run in range(4):
        before = set(_rows(flow))
        worker.run_verification(run=run)
        checked_by_run.append(set(_rows(flow)) - before)
        assert len(checked_by_run[-1]) == 10, run  # each run its batch: never one checked twice
        # What the run left: the partitions not reached yet, 6 records each, never looked at (from this run).
        backlog = VerificationBacklog.objects.get(flow=flow)
        waiting = 40 - 10 * (run + 1)
        assert (backlog.partitions_waiting, backlog.records_waiting) == (waiting, 6 * waiting), run
        assert backlog.oldest_look_at == (
            max(r.checked_at for r in _rows(flow).values()) if waiting else None
        )
        found = FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.DATA_MISMATCH)
        assert found.exists() == (run == 3), run
    assert set().union(*checked_by_run) == set(mirrored.topic_partitions())
    assert late in checked_by_run[3]

    row = _rows(flow)[late]
    assert (row.status, row.mismatch_offset, row.verified_up_to) == ("mismatch", 3, 0)
    event = FlowEvent.objects.get(flow=flow, kind=FlowEventKind.DATA_MISMATCH)
    assert event.first_offset == 3 and (event.topic, event.partition) == late
    assert event.detail["source"]["value"] == "v3" and event.detail["target"]["value"] == "altered"
    assert sum(r.status == "ok" for r in _rows(flow).values()) == 39

    # New records everywhere: the next run resumes with the partitions checked longest ago (the first run's).
    append_mirrored(mirrored, flow=flow, source=cluster_a, target=cluster_b, records=2)
    checked = {key: row.checked_at for key, row in _rows(flow).items()}
    time.sleep(0.01)
    worker.run_verification(run=4)
    moved = {key for key, row in _rows(flow).items() if row.checked_at != checked[key]}
    assert moved == checked_by_run[0]
    # The 30 not reached wait since their last look (the oldest: run 1's); the mismatching one re-checks its range.
    backlog = VerificationBacklog.objects.get(flow=flow)
    assert backlog.partitions_waiting == 30 and backlog.records_waiting >= 29 * 2
    assert backlog.oldest_look_at == min(checked[key] for key in checked if key not in moved)
    assert FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.DATA_MISMATCH).count() == 1


def test_flows_share_a_spent_budget_in_turn_and_a_flow_not_reached_is_not_visited(
    make_flow, cluster_a, cluster_b, unique_name, settings, monkeypatch, verifier_cache
):
    """Once a run's budget is spent the flows after it wait for the next run, which starts with them: no
    ends read, no row written for them (at 20,000 partitions over 4 flows on a loaded machine, runs of
    50-145 s read and stored every flow for one batch checked)."""
    from controlplane.flows import services
    from controlplane.flows.models import Cluster

    settings.VERIFY_RUN_BUDGET_S = 0  # one round of one batch per run
    settings.VERIFY_BATCH_PARTITIONS = 10
    monkeypatch.setattr(worker, "_next_flow_id", 0)
    forward = make_flow(topics=[f"{unique_name}-a"])
    reverse = services.flow_create(
        actor=None,
        source=Cluster.objects.get(alias="B"),
        target=Cluster.objects.get(alias="A"),
        enabled=True,
        topics=[f"{unique_name}-b"],
    )
    for flow, source, target, suffix in (
        (forward, cluster_a, cluster_b, "a"),
        (reverse, cluster_b, cluster_a, "b"),
    ):
        seed_mirrored(
            flow=flow,
            source=source,
            target=target,
            topics=[f"{unique_name}-{suffix}"],
            partitions=20,
            records=2,
        )

    def visited() -> dict[int, int]:
        """Per flow: the partitions checked so far, and whether its backlog row was written (-1: not)."""
        backlogs = set(VerificationBacklog.objects.values_list("flow_id", flat=True))
        return {
            flow.pk: PartitionVerification.objects.filter(flow=flow).count() if flow.pk in backlogs else -1
            for flow in (forward, reverse)
        }

    seen = []
    for run in range(4):
        worker.run_verification(run=run)
        seen.append(visited())
    assert seen == [
        {forward.pk: 10, reverse.pk: -1},  # the forward flow spent the budget: the reverse one not visited
        {forward.pk: 10, reverse.pk: 10},  # the next run starts with it
        {forward.pk: 20, reverse.pk: 10},
        {forward.pk: 20, reverse.pk: 20},
    ]
