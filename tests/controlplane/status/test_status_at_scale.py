"""Status at scale (DESIGN.md 6, issue 34): a slice of a 2,000-partition task writes a bounded number of
statements and only the rows that changed; the roll-ups every page, scrape and alert evaluation read come
from the tasks' rows, never from every partition row; an idle partition's row stays fresh while its task
reports, without being rewritten."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from django.db import DataError, connection
from django.db.models import signals
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.alerts import evaluation
from controlplane.assurance.models import PartitionVerification, VerificationStatus
from controlplane.flows import services
from controlplane.status import partition_writes, rollup, runtime
from controlplane.status.models import FlowPartitionStatus, FlowTaskStatus, PartitionState
from replication.metrics import PartitionMetrics

PARTITIONS = 2000
STATUS_TABLE = FlowPartitionStatus._meta.db_table


def _metrics(partition: int, *, offset: int, behind: int = 0) -> PartitionMetrics:
    return PartitionMetrics(
        topic=f"A.t{partition // 100}",
        partition=partition % 100,
        source_topic=f"t{partition // 100}",
        record_count=offset,
        record_rate=0.0,
        byte_count=offset * 10,
        byte_rate=0.0,
        record_age_ms=None,
        replication_latency_ms=None,
        records_behind=behind,
        seconds_behind=1.0 if behind else 0.0,
        source_end_offset=offset + behind,
        next_offset=offset,
        skipped_count=0,
        gap_count=0,
        lost_records=0,
        stopped=False,
        last_error=None,
    )


@pytest.fixture
def flow(db, two_clusters):
    a, b = two_clusters
    return services.flow_create(actor=None, source=a, target=b, enabled=True, topics=["t.*"])


def _save(flow, metrics, writes, *, at: datetime, task_error: str | None = None) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        written = partition_writes.partition_statuses_save(
            flow_id=flow.pk,
            task_index=0,
            partitions=metrics,
            task_error=task_error,
            at=at,
            writes=writes,
            refresh_s=10.0,
        )
    return written, [q["sql"] for q in queries.captured_queries]


def _writes_to(table: str, statements: list[str]) -> int:
    return sum(1 for sql in statements if sql.startswith(("INSERT", "UPDATE")) and f'"{table}"' in sql)


def test_a_slice_writes_one_statement_of_the_rows_that_changed_and_idle_rows_not_at_all(flow):
    writes = partition_writes.StatusWrites()
    start = timezone.now()
    moving = [_metrics(p, offset=100) for p in range(PARTITIONS)]

    written, statements = _save(flow, moving, writes, at=start)  # a task's first slice: every row
    assert written == PARTITIONS and FlowPartitionStatus.objects.filter(flow=flow).count() == PARTITIONS
    assert _writes_to(STATUS_TABLE, statements) == 1 and len(statements) <= 6

    # Nothing changed: no partition row, one roll-up row.
    written, statements = _save(flow, moving, writes, at=start + timedelta(seconds=1))
    assert written == 0 and _writes_to(STATUS_TABLE, statements) == 0
    assert _writes_to(FlowTaskStatus._meta.db_table, statements) == 1 and len(statements) <= 5

    # Ten partitions move: their rows wait until they are 10 s old, the roll-up has the new figures at once.
    moved = [_metrics(p, offset=150, behind=3) if p < 10 else m for p, m in enumerate(moving)]
    written, _ = _save(flow, moved, writes, at=start + timedelta(seconds=2))
    assert written == 0
    task = FlowTaskStatus.objects.get(flow=flow, task_index=0)
    assert task.records_behind == 30 and task.position == 100 * PARTITIONS + 50 * 10
    assert task.rows_current_at == start  # the moved rows' stored copies are as of the first slice
    written, statements = _save(flow, moved, writes, at=start + timedelta(seconds=10))
    assert written == 10 and _writes_to(STATUS_TABLE, statements) == 1
    assert FlowPartitionStatus.objects.get(flow=flow, topic="t0", partition=0).replicated_offset == 150

    # A state change (the task fails) is written in the slice it happens, for every partition.
    written, statements = _save(flow, moved, writes, at=start + timedelta(seconds=11), task_error="B down")
    assert written == PARTITIONS and _writes_to(STATUS_TABLE, statements) == 1
    assert not FlowPartitionStatus.objects.filter(flow=flow).exclude(state=PartitionState.ERR).exists()


def test_rows_that_move_together_are_rewritten_spread_over_the_refresh_period_at_the_same_rate(flow):
    """Every partition moves every 1 s slice (as at 1 record/s each): after the first slice, which writes
    them all, each slice writes a tenth of them (10 s refresh), never all at once (before: none for nine
    slices, then all 2,000 in one); no row waits longer than the refresh, and the task's figures are never
    older than it."""
    writes, start = partition_writes.StatusWrites(), timezone.now()
    per_slice, rows_current = [], []
    for second in range(31):
        moving = [_metrics(p, offset=100 + second) for p in range(PARTITIONS)]
        written, _ = _save(flow, moving, writes, at=start + timedelta(seconds=second))
        per_slice.append(written)
        task = FlowTaskStatus.objects.get(flow=flow, task_index=0)
        rows_current.append((task.observed_at - task.rows_current_at).total_seconds())
    assert per_slice[0] == PARTITIONS
    assert max(per_slice[1:]) <= PARTITIONS // 10 + 1
    assert sum(per_slice[1:]) <= 3 * PARTITIONS + PARTITIONS // 10  # one write per row per 10 s
    assert max(rows_current) < 10.0
    oldest = FlowPartitionStatus.objects.filter(flow=flow).order_by("observed_at").first()
    assert (start + timedelta(seconds=30) - oldest.observed_at).total_seconds() < 10.0


def test_the_one_statement_upsert_stores_every_figure_as_the_orm_reads_it(flow):
    """Inserted, then updated in place (one row per partition): every column as the figures have it,
    unknown ones NULL, the latency histogram as JSON, an error's text whole."""
    at = timezone.now()
    first = dataclasses.replace(_metrics(0, offset=5), source_end_offset=None, next_offset=None)
    second = dataclasses.replace(
        _metrics(0, offset=7, behind=2),
        record_rate=1.5,
        byte_rate=15.25,
        record_age_ms=12.4,
        replication_latency_ms=3.0,
        latency_counts=(0, 4, 1),
        latency_sum_ms=22.5,
        aborted_count=3,
        last_error="quote ' \" \\ and {braces}, [1], NULL",
    )
    for metrics, when in ((first, at), (second, at + timedelta(seconds=1))):
        figures = partition_writes.StatusFigures.of(metrics, task_index=0, task_error=None)
        assert _save(flow, [metrics], None, at=when)[0] == 1
        (row,) = FlowPartitionStatus.objects.filter(flow=flow)
        stored = partition_writes.StatusFigures(
            *(getattr(row, name) for name in partition_writes.StatusFigures._fields)
        )
        assert stored._replace(latency_counts=tuple(stored.latency_counts)) == figures
        assert row.observed_at == when
    assert row.records_behind == 2 and row.latency_counts == [0, 4, 1] and row.source_end_offset == 9


def test_a_late_report_of_another_task_never_overwrites_a_newer_row(flow):
    """Partitions assigned anew: their new task (index 1) wrote at t+1; the report of the task that had
    them (index 0), made at t and stored late, leaves those rows as they are. A task's own rows are
    always written (a clock stepped back never freezes them)."""
    at = timezone.now()
    metrics = [_metrics(p, offset=100) for p in range(3)]
    stale = [_metrics(p, offset=40, behind=60) for p in range(3)]

    def save(task_index: int, partitions, when: datetime) -> None:
        partition_writes.partition_statuses_save(
            flow_id=flow.pk, task_index=task_index, partitions=partitions, task_error=None, at=when
        )

    save(1, metrics, at + timedelta(seconds=1))
    save(0, stale, at)
    rows = FlowPartitionStatus.objects.filter(flow=flow)
    assert {(r.task_index, r.replicated_offset, r.records_behind) for r in rows} == {(1, 100, 0)}
    save(1, stale, at)  # its own, older: written
    assert {(r.task_index, r.replicated_offset) for r in rows.all()} == {(1, 40)}
    save(0, metrics, at + timedelta(seconds=2))  # another task's, newer: written
    assert {(r.task_index, r.replicated_offset) for r in rows.all()} == {(0, 100)}


def test_an_idle_partitions_figures_are_made_once_and_kept_by_its_source_partition(flow):
    """The figures of metrics that did not change are last slice's object (compared by identity), also
    when the remote topic's name differs from the source topic's (`A.t0` of `t0`)."""
    writes = partition_writes.StatusWrites()
    idle = [_metrics(p, offset=100) for p in range(3)]
    made = writes.figures(idle, task_index=0, task_error=None)
    _save(flow, idle, writes, at=timezone.now())
    again = writes.figures(idle, task_index=0, task_error=None)
    assert all(before is after for before, after in zip(made, again, strict=True))
    assert set(writes.partitions) == {("t0", p) for p in range(3)}
    failing = writes.figures(idle, task_index=0, task_error="B down")  # the same metrics, a new error
    assert all(f.last_error == "B down" for f in failing) and failing[0] is not made[0]


def test_a_lag_that_becomes_known_is_written_at_once(flow):
    writes = partition_writes.StatusWrites()
    at = timezone.now()
    unknown = dataclasses.replace(_metrics(0, offset=7), source_end_offset=None)  # no fetch answer yet
    assert _save(flow, [unknown], writes, at=at)[0] == 1
    assert FlowPartitionStatus.objects.get(flow=flow).records_behind is None
    assert _save(flow, [_metrics(0, offset=7)], writes, at=at + timedelta(seconds=1))[0] == 1
    assert FlowPartitionStatus.objects.get(flow=flow).records_behind == 0


def test_a_partition_passed_over_is_written_as_stall_at_once_and_ok_again_once_fetched(flow):
    """The engine's fetch-stall check flags a partition whose records wait and none is fetched: Burrow's
    STALL on its row in that slice (a state change waits for no refresh), OK once it is fetched again."""
    writes = partition_writes.StatusWrites()
    at = timezone.now()
    moving = _metrics(0, offset=7, behind=3)
    assert _save(flow, [moving], writes, at=at)[0] == 1
    stalled = dataclasses.replace(moving, stalled=True)
    assert _save(flow, [stalled], writes, at=at + timedelta(seconds=1))[0] == 1
    assert FlowPartitionStatus.objects.get(flow=flow).state == PartitionState.STALL
    assert FlowTaskStatus.objects.get(flow=flow).state_counts == {PartitionState.STALL: 1}
    assert _save(flow, [moving], writes, at=at + timedelta(seconds=2))[0] == 1
    assert FlowPartitionStatus.objects.get(flow=flow).state == PartitionState.OK
    # a failing task's ERR names its error first; data loss's STOP wins over both
    assert _save(flow, [stalled], writes, at=at + timedelta(seconds=3), task_error="boom")[0] == 1
    assert FlowPartitionStatus.objects.get(flow=flow).state == PartitionState.ERR
    stopped = dataclasses.replace(stalled, stopped=True)
    assert _save(flow, [stopped], writes, at=at + timedelta(seconds=4), task_error="boom")[0] == 1
    assert FlowPartitionStatus.objects.get(flow=flow).state == PartitionState.STOP


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite does not enforce a column's length")
def test_a_failed_write_is_written_again_next_slice(flow):
    writes = partition_writes.StatusWrites()
    at = timezone.now()
    good = [_metrics(p, offset=5) for p in range(3)]
    refused = dataclasses.replace(good[0], source_topic="x" * 300, partition=9)  # longer than a topic can be
    with pytest.raises(DataError):
        _save(flow, [*good, refused], writes, at=at)
    written, _ = _save(flow, good, writes, at=at + timedelta(seconds=1))
    assert written == 3  # nothing of the failed slice counts as stored


def _status_reads(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if f'"{STATUS_TABLE}"' in q["sql"]]


def test_summaries_and_alert_evaluation_read_no_partition_row(flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    writes = partition_writes.StatusWrites()
    now = timezone.now()
    partition_writes.partition_statuses_save(
        flow_id=flow.pk,
        task_index=0,
        partitions=[_metrics(p, offset=100, behind=p % 3) for p in range(PARTITIONS)],
        task_error=None,
        at=now,
        writes=writes,
    )
    with CaptureQueriesContext(connection) as queries:
        (summary,) = rollup.flow_summaries()
        evaluation.alerts_evaluate()
    assert _status_reads(queries) == []
    assert summary.partition_count == PARTITIONS and summary.records_behind == sum(
        p % 3 for p in range(PARTITIONS)
    )
    assert summary.seconds_behind == 1.0 and summary.status == PartitionState.OK
    assert summary.state_counts == {PartitionState.OK: PARTITIONS}
    assert [(w["topic"], w["records_behind"]) for w in summary.worst][:1] == [("t0", 2)]
    assert len(summary.worst) == rollup.WORST_KEPT


def test_an_idle_row_stays_fresh_while_its_task_reports_and_goes_stale_when_it_stops(flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 10
    writes = partition_writes.StatusWrites()
    start = timezone.now() - timedelta(seconds=60)
    idle = [_metrics(p, offset=100) for p in range(3)]
    for second in range(0, 60, 1):  # a minute of slices, nothing moves: the rows are written once
        partition_writes.partition_statuses_save(
            flow_id=flow.pk,
            task_index=0,
            partitions=idle,
            task_error=None,
            at=start + timedelta(seconds=second),
            writes=writes,
        )
    rows = list(FlowPartitionStatus.objects.filter(flow=flow))
    assert {row.observed_at for row in rows} == {start}
    now = start + timedelta(seconds=60)
    live = rollup.partitions_live(rows, flow=flow, budget=rollup.DEFAULT_BUDGET, now=now)
    assert all(not p.stale and p.health == "ok" and p.age_s <= 1.5 for p in live)
    later = now + timedelta(seconds=30)  # its task stopped reporting
    live = rollup.partitions_live(rows, flow=flow, budget=rollup.DEFAULT_BUDGET, now=later)
    assert all(p.stale and p.state == rollup.STALE for p in live)
    summary = rollup.summarize(
        flow, list(flow.task_statuses.all()), now=later, stale_after=10, budget=rollup.DEFAULT_BUDGET
    )
    assert summary.status == rollup.STALE and summary.state_counts == {rollup.STALE: 3}


def test_a_retired_task_drops_its_roll_up(flow):
    at = datetime.now(UTC)
    for task_index in (0, 1):
        partition_writes.partition_statuses_save(
            flow_id=flow.pk,
            task_index=task_index,
            partitions=[_metrics(task_index, offset=1)],
            task_error=None,
            at=at,
        )
    runtime.task_status_retire(flow_id=flow.pk, task_index=1)
    assert list(flow.task_statuses.values_list("task_index", flat=True)) == [0]
    assert dataclasses.replace(rollup.flow_summaries()[0]).partition_count == 1


def test_the_verification_api_reads_one_page_of_2000_rows_mismatches_first(flow, client_as):
    statuses = (VerificationStatus.OK, VerificationStatus.PENDING, VerificationStatus.UNVERIFIABLE)
    mismatching = {1999, 7, 1000}
    PartitionVerification.objects.bulk_create(
        PartitionVerification(
            flow=flow,
            topic=f"t{p // 100}",
            partition=p % 100,
            status=VerificationStatus.MISMATCH if p in mismatching else statuses[p % 3],
            verified_from=0,
            verified_up_to=10,
        )
        for p in range(PARTITIONS)
    )
    loaded = []

    def count(sender, instance, **kwargs):
        loaded.append((instance.topic, instance.partition))

    signals.post_init.connect(count, sender=PartitionVerification)
    try:
        with CaptureQueriesContext(connection) as queries:
            body = client_as("viewer").get(f"/api/v1/flows/{flow.pk}/verification/", {"page_size": 20}).json()
    finally:
        signals.post_init.disconnect(count, sender=PartitionVerification)
    page = body["partitions"]
    assert (page["count"], page["pages"], len(page["results"])) == (PARTITIONS, 100, 20)
    assert (body["partition_count"], body["verified_count"], body["mismatch_count"]) == (
        PARTITIONS,
        PARTITIONS,
        3,
    )
    shown = [(r["status"], r["topic"], r["partition"]) for r in page["results"]]
    assert shown[:4] == [
        ("mismatch", "t0", 7),
        ("mismatch", "t10", 0),
        ("mismatch", "t19", 99),
        ("unverifiable", "t0", 2),
    ]
    # The rows read: the page and the mismatching ones the roll-up names; the rest are aggregates.
    assert len(loaded) == 20 + len(mismatching)
    reads = [q["sql"] for q in queries if PartitionVerification._meta.db_table in q["sql"]]
    assert len(reads) == 4  # the roll-up, its mismatches, the page's COUNT, the page
    last = client_as("viewer").get(
        f"/api/v1/flows/{flow.pk}/verification/", {"page": 10**6, "page_size": 500}
    )
    assert (last.json()["partitions"]["page"], len(last.json()["partitions"]["results"])) == (4, 500)
    assert client_as("viewer").get(f"/api/v1/flows/{flow.pk}/verification/", {"page": "x"}).status_code == 400
