"""The engine's cost follows the records, not the partitions (issue 34): a task of 2,000 partitions whose
fetches return one or two of them does per fetch the work of those records, asks its source nothing
about the others, and writes a moving partition's position at most once per 5 s (an idle one's never),
still resuming exactly after a crash. Counted on the in-memory clients of replication/memory/task_io.py
(work as lines of `replication/` code run, client calls, position records), never timed."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import replication
from replication import positions
from replication.config import DeliveryGuarantee, FlowConfig
from replication.memory.task_io import MemoryIO, MemorySink, MemorySource
from replication.mirroring import source_offsets
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import replication_policy_for
from replication.positions import POSITION_RECORD_INTERVAL_S, InMemoryPositionStore
from replication.slices import SHOWN_ERRORS, SliceErrorKind, errors_text
from replication.source import MirrorSourceTask
from replication.task_metrics import ROTATION_MINIMUM

TOPIC, REMOTE = "orders", "A.orders"
PARTITIONS = 2_000
REPLICATION_DIR = str(Path(replication.__file__).parent)
MEMORY_DIR = str(Path(replication.__file__).parent / "memory")  # the in-memory clusters: the broker's work


class LinesRun:
    """Counts the lines of `replication/` code run while active (sys.settrace): the engine's work (the
    in-memory clusters', `replication/memory/`, stands for the broker's and is not counted)."""

    def __init__(self) -> None:
        self.count = 0

    def _local(self, frame, event, arg):
        if event == "line":
            self.count += 1
        return self._local

    def _global(self, frame, event, arg):
        filename = frame.f_code.co_filename
        engine = filename.startswith(REPLICATION_DIR) and not filename.startswith(MEMORY_DIR)
        return self._local if engine else None

    def __enter__(self) -> LinesRun:
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc_info) -> None:
        sys.settrace(None)


class CountingSource(MemorySource):
    """A `MemorySource` that counts the per-partition calls the task makes (watermarks, position) and
    notes, at each fetch, the calls and lines run since the previous one; `trickle` partitions get one
    new record before each fetch, taking turns (so a fetch returns one partition)."""

    def __init__(self, cluster, *, lines: LinesRun) -> None:
        super().__init__(cluster)
        self.lines = lines
        self.calls = 0
        self.trickle: list[int] = []
        self.fetches: list[tuple[int, int, int]] = []  # (records returned, calls, lines) at each fetch

    def fetch(self, *, first_wait_s: float, max_records: int):
        if self.trickle:
            partition = self.trickle[len(self.fetches) % len(self.trickle)]
            self.cluster.append(TOPIC, partition, key=b"k", value=b"v", timestamp_ms=1_700_000_000_000)
        fetched = super().fetch(first_wait_s=first_wait_s, max_records=max_records)
        self.fetches.append((len(fetched), self.calls, self.lines.count))
        return fetched

    def watermarks(self, topic: str, partition: int):
        self.calls += 1
        return super().watermarks(topic, partition)

    def position(self, topic: str, partition: int):
        self.calls += 1
        return super().position(topic, partition)


class CountingStore(InMemoryPositionStore):
    """Counts the position records written per partition."""

    def __init__(self) -> None:
        super().__init__()
        self.records: Counter = Counter()

    def save(self, *, flow, positions) -> None:
        self.records.update(positions.keys())
        super().save(flow=flow, positions=positions)


def flow(guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE) -> FlowConfig:
    return FlowConfig(source="A", target="B", enabled=True, topics=(TOPIC,), delivery_guarantee=guarantee)


def make_task(
    io: MemoryIO,
    source: MemorySource,
    store,
    *,
    partitions: int,
    clock=time.time,
    guarantee=DeliveryGuarantee.AT_LEAST_ONCE,
    transactional: bool = False,
) -> MirrorSourceTask:
    config = flow(guarantee)
    task = MirrorSourceTask(
        flow=config,
        policy=replication_policy_for(config, known_aliases=("A", "B")),
        task_index=0,
        position_store=store,
        io=dataclasses.replace(io.task_io(transactional=transactional), source=source),
        clock=clock,
    )
    task.assign([(TOPIC, p) for p in range(partitions)])
    return task


def memory_clusters(partitions: int) -> MemoryIO:
    io = MemoryIO()
    io.source_cluster.create(TOPIC, partitions)
    io.target_cluster.create(REMOTE, partitions)
    return io


def test_a_fetch_of_one_partition_costs_the_same_work_in_a_task_of_2000_partitions():
    io, lines = memory_clusters(PARTITIONS), LinesRun()
    source = CountingSource(io.source_cluster, lines=lines)
    task = make_task(io, source, InMemoryPositionStore(), partitions=PARTITIONS)
    task.run_slice(max_seconds=0.2, settle=False)  # starts the 2,000 partitions (once)
    source.trickle = [7, 1_500]  # each fetch now returns one record of one of two partitions
    source.fetches.clear()
    with lines:
        result = task.run_slice(max_records=50, max_seconds=60, settle=False)
    assert result.ok and result.records == 50
    # Between one fetch and the next: the record produced, its acknowledgement, the mid-slice persists
    # (offset syncs and positions every 0.2 s): no walk over the 2,000 partitions (about 4,000 lines
    # per fetch before), no question to the source about any partition.
    steps = list(zip(source.fetches, source.fetches[1:], strict=False))
    assert len(steps) > 20
    lines_per_fetch = [after[2] - before[2] for before, after in steps]
    calls_per_fetch = [after[1] - before[1] for before, after in steps]
    assert max(lines_per_fetch) < 400, lines_per_fetch
    assert sum(calls_per_fetch) == 0


def test_whether_a_transaction_goes_on_asks_only_about_the_partitions_fetched_since_it_was_last_asked(
    monkeypatch,
):
    """exactly_once: the backlog behind the open transaction is every running partition's
    (`replication.progress.Backlog`), yet a check asks the source about the partitions fetched since the
    last one only (a scan of the 2,000: 4,000 calls a check)."""
    monkeypatch.setattr(positions, "PERSIST_RECORDS", 10)  # a check every 10 acknowledged records
    io, lines = memory_clusters(PARTITIONS), LinesRun()
    source = CountingSource(io.source_cluster, lines=lines)
    task = make_task(
        io,
        source,
        InMemoryPositionStore(),
        partitions=PARTITIONS,
        guarantee=DeliveryGuarantee.EXACTLY_ONCE,
        transactional=True,
    )
    for partition in (7, 1_500):  # a transaction in the first slice: its check asks about all 2,000, once
        io.source_cluster.append(TOPIC, partition, key=b"k", value=b"v", timestamp_ms=1_700_000_000_000)
    task.run_slice(max_seconds=0.2, settle=False)  # starts the 2,000 partitions
    source.trickle = [7, 1_500]
    source.fetches.clear()
    commits = io.made[-1].calls.count("commit")
    result = task.run_slice(max_records=50, max_seconds=60, settle=False)
    assert result.ok and result.records == 50
    assert io.made[-1].calls.count("commit") - commits >= 4  # checks found no backlog: they committed
    steps = list(zip(source.fetches, source.fetches[1:], strict=False))
    calls_per_fetch = [after[1] - before[1] for before, after in steps]
    # A check asks about the two partitions' ends and positions. The first check after the 2,000 started
    # asks about each of them once: in the first slice, or in this one when the first slice ended before
    # its persist cadence came (a fresh-clone CI: one step of 4,000 calls). A walk per check: >= 4 such steps.
    over = [calls for calls in calls_per_fetch if calls > 4]
    assert len(over) <= 1 and sum(over) <= 2 * PARTITIONS, calls_per_fetch


def test_an_idle_task_of_2000_partitions_asks_its_source_about_a_share_of_them_per_slice():
    io, lines = memory_clusters(PARTITIONS), LinesRun()
    source = CountingSource(io.source_cluster, lines=lines)
    # The task's clock moves 0.25 s per slice, whatever the machine's load: the share a slice looks at
    # grows with the time since the last one (on the wall clock, a slow slice at load 25-30 took more).
    now, step_s = [1_700_000_000.0], 0.25  # (exact in binary: the share is exactly 100)
    task = make_task(io, source, InMemoryPositionStore(), partitions=PARTITIONS, clock=lambda: now[0])
    assert task.run_slice(max_seconds=5, settle=False, return_when_caught_up=True).caught_up
    calls, slices = source.calls, 20
    for _ in range(slices):
        now[0] += step_s
        # An empty fetch finds the task caught up without asking the source about any partition; the
        # slice end looks at a rotating share (data-loss check, metrics) so each is seen every 5 s.
        assert task.run_slice(max_seconds=5, settle=False, return_when_caught_up=True).caught_up
    per_slice = (source.calls - calls) / slices
    assert per_slice <= 3 * max(ROTATION_MINIMUM, PARTITIONS * step_s / 5)  # (before: 10,000 a slice)


def test_position_records_coalesce_to_one_per_partition_per_5_s_while_it_moves_and_none_while_idle():
    io, store = memory_clusters(20), CountingStore()
    now = [1_700_000_000.0]
    task = make_task(io, MemorySource(io.source_cluster), store, partitions=20, clock=lambda: now[0])
    moving, seconds = range(5), 60
    for _ in range(seconds):  # one slice per (simulated) second, 10 records per second per moving one
        for partition in moving:
            for _ in range(10):
                io.source_cluster.append(TOPIC, partition, key=b"k", value=b"v")
        task.run_slice(max_seconds=0.05, settle=False)
        now[0] += 1.0
    # Before: one position record per partition per persist, at least one per slice (per second here).
    for partition in moving:
        assert store.records[(TOPIC, partition)] <= seconds / POSITION_RECORD_INTERVAL_S + 1
        assert store.records[(TOPIC, partition)] >= seconds / POSITION_RECORD_INTERVAL_S - 1
    # Idle: written once, the start of a partition never replicated before (so that a later start
    # knows what retention deleted meanwhile), never again.
    assert all(store.records[(TOPIC, p)] == 1 for p in range(5, 20))
    written = store.load(flow=task.flow.name, partitions=[(TOPIC, p) for p in moving])
    assert all(0 < offset <= 10 * seconds for offset in written.values())
    task.close()  # a close writes every moved position: whoever resumes redoes nothing
    assert store.load(flow=task.flow.name, partitions=[(TOPIC, p) for p in moving]) == {
        (TOPIC, p): 10 * seconds for p in moving
    }


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.EXACTLY_ONCE])
def test_a_crash_between_coalesced_position_records_loses_nothing_and_exactly_once_duplicates_nothing(
    guarantee,
):
    io, store = memory_clusters(2), CountingStore()
    now = [1_700_000_000.0]
    sink = MemorySink(io.target_cluster)
    io.sinks.append(sink)
    crashed = make_task(
        io, MemorySource(io.source_cluster), store, partitions=2, clock=lambda: now[0], guarantee=guarantee
    )
    for second in range(12):
        for partition in range(2):
            for i in range(10):
                io.source_cluster.append(TOPIC, partition, key=b"k", value=b"s%d-%d" % (second, i))
        crashed.run_slice(max_seconds=0.05, settle=False)
        now[0] += 1.0
    sink.hold = {(REMOTE, 0), (REMOTE, 1)}
    for partition in range(2):
        io.source_cluster.append(TOPIC, partition, key=b"k", value=b"in-flight")
    crashed.run_slice(max_seconds=0.05, settle=False)
    sink.lose_reports()  # kill -9: what was in flight reaches the target, the task never hears of it
    stored = store.load(flow=crashed.flow.name, partitions=[(TOPIC, 0), (TOPIC, 1)])
    # The acknowledged records beyond the stored positions (coalesced) are what the restart redoes.
    assert all(offset < 120 for offset in stored.values())

    resumed = make_task(io, MemorySource(io.source_cluster), store, partitions=2, guarantee=guarantee)
    for _ in range(20):
        if resumed.run_slice(max_seconds=5, return_when_caught_up=True).positions == {
            (TOPIC, 0): 121,
            (TOPIC, 1): 121,
        }:
            break
    for partition in range(2):
        source = [record.value() for record in io.source_cluster.read(TOPIC, partition)]
        target = [record.value() for record in io.target_cluster.read(REMOTE, partition)]
        if guarantee == DeliveryGuarantee.EXACTLY_ONCE:
            assert target == source
            offsets = source_offsets([r.headers() for r in io.target_cluster.read(REMOTE, partition)])
            assert offsets == list(range(121))
        else:  # written again: what followed the stored position, no more; nothing lost
            assert sorted(set(target)) == sorted(set(source))
            assert len(target) == len(source) + 121 - stored[(TOPIC, partition)]
    resumed.close()
    if guarantee == DeliveryGuarantee.EXACTLY_ONCE:
        syncs = OffsetSyncStore()
        syncs.update_all(io.emitter.emitted)
        for partition in range(2):
            for upstream in range(121):
                assert syncs.translate_downstream(TOPIC, partition, upstream) == upstream


def test_a_task_of_2000_partitions_that_cannot_start_says_so_in_a_few_lines(caplog):
    """Issue 34 (found at 5,000 partitions: new topics whose leaders were not elected yet): each partition
    keeps its own error (its status row names it), while the log has a few lines a slice and the task's
    error, copied into events and into the rows of partitions without one, stays a line (it joined every
    error: 600 KB at 5,000 partitions, 190,000 log lines in 70 s)."""
    io = memory_clusters(PARTITIONS)
    io.source_cluster.unreachable = "Broker: Not leader for partition"
    task = make_task(io, MemorySource(io.source_cluster), InMemoryPositionStore(), partitions=PARTITIONS)

    with caplog.at_level(logging.ERROR, logger="replication.source"):
        result = task.run_slice(max_records=1000, max_seconds=0.05)

    assert len(result.errors) == PARTITIONS and all(e.kind is SliceErrorKind.START for e in result.errors)
    assert len(caplog.records) == SHOWN_ERRORS + 1
    assert f"and {PARTITIONS - SHOWN_ERRORS - 1:,} more error(s)" in caplog.records[-1].getMessage()
    text = errors_text(result.errors)
    assert len(text) < 1_000 and f"and {PARTITIONS - SHOWN_ERRORS:,} more error(s) about" in text
    own = {p.partition: p.last_error for p in task.metrics.snapshot()}
    assert len(own) == PARTITIONS and all("Not leader" in (error or "") for error in own.values())
