"""Prometheus metrics (`/metrics`): the live status every page shows, in Prometheus's vocabulary.

The families are computed at scrape time from what the workers stored (status rows with their
`observed_at`, flow events, operations) and what the runtime announces in Redis (presence), through
the same selectors as the pages and the API, so `records_behind` on a dashboard is the figure of the flow
page. Computing them from shared state is what makes the endpoint safe under gunicorn's several worker
processes: whichever process answers a scrape returns the same values; no per-process counters exist to
be merged. When PROMETHEUS_MULTIPROC_DIR is set, process-local metrics of the web processes are merged in
with prometheus-client's multiprocess collector as well.

Names follow Prometheus conventions (base units, `_total` for counters); docs/metrics.md maps each to
MM2's JMX name where MM2 has one.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, F, Sum
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from controlplane import alerts, assurance
from controlplane.alerts.models import Alert, AlertState
from controlplane.assurance.models import PartitionVerification, VerificationStatus
from controlplane.core import presence
from controlplane.metrics.text import (
    HistogramSeries,
    LabelSet,
    PartitionLabels,
    PartitionSeries,
    Series,
    render_text,
)
from controlplane.operations.models import Operation
from controlplane.status import partitions, rollup, topic_rollups
from controlplane.status.models import (
    FlowEvent,
    FlowEventKind,
)
from replication.metrics import LATENCY_BUCKETS_MS, cumulative

# Per partition, the labels MM2's JMX names carry (flow = source->target; topic = the source topic; and
# partition: `PartitionLabels`): fewer labels per series keeps a scrape of 20,000 partitions under a second.
TOPIC_LABELS = ["flow", "topic"]
FLOW_LABELS = ["flow", "source", "target"]


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def per_partition(summary: rollup.FlowSummary) -> bool:
    """Whether the flow's partitions are exported one by one (MIRRORPLANE_METRICS_PARTITION_LEVEL; auto:
    flows of at most MIRRORPLANE_METRICS_PARTITION_LIMIT partitions); every flow is exported per topic."""
    level = settings.MIRRORPLANE_METRICS_PARTITION_LEVEL
    if level == "auto":
        return summary.partition_count <= settings.MIRRORPLANE_METRICS_PARTITION_LIMIT
    return level == "partition"


def _gauge(name: str, doc: str, labels: list[str], unit: str = "") -> Series:
    return Series(f"mirrorplane_{name}", doc, "gauge", labels=labels, unit=unit)


def _counter(name: str, doc: str, labels: list[str]) -> Series:
    return Series(f"mirrorplane_{name}", doc, "counter", labels=labels)


def _histogram(name: str, doc: str, labels: list[str]) -> HistogramSeries:
    return HistogramSeries(f"mirrorplane_{name}", doc, labels=labels)


def flow_labels(summaries) -> dict[int, LabelSet]:
    """Each flow's labels (FLOW_LABELS), written as text once per scrape for its some 40 families."""
    return {
        summary.flow.pk: LabelSet(
            FLOW_LABELS, (summary.flow.name, summary.flow.source.alias, summary.flow.target.alias)
        )
        for summary in summaries
    }


def latency_histogram(partitions) -> tuple[list[tuple[str, float]], float] | None:
    """The latency counts of partitions (or flow roll-ups) summed, as Prometheus (le, cumulative count) buckets in seconds and
    the sum in seconds; None before any record was acknowledged. Rows of another bucket layout (written by
    a worker of another version) are left out rather than mis-bucketed."""
    width = len(LATENCY_BUCKETS_MS) + 1
    counts, total_ms = [0] * width, 0.0
    for p in partitions:
        if len(p.latency_counts or ()) == width:
            counts = [a + b for a, b in zip(counts, p.latency_counts, strict=True)]
            total_ms += p.latency_sum_ms
    if not any(counts):
        return None
    bounds = [*(f"{bound / 1000:g}" for bound in LATENCY_BUCKETS_MS), "+Inf"]
    return list(zip(bounds, cumulative(counts), strict=True)), total_ms / 1000


class MirrorplaneCollector:
    """Yields every Mirrorplane family from the database and Redis as of the scrape."""

    def collect(self) -> Iterator[Metric]:
        summaries = rollup.flow_summaries()
        topics = topic_rollups.topic_statuses(flow_ids=[summary.flow.pk for summary in summaries])
        # Read once for every flow and every family: signals, budgets, verification (a scrape's statements
        # do not grow with the flows; tests/controlplane/metrics/test_metrics_partition_level.py counts them).
        reads = assurance.readiness_reads_of(summaries)
        labels = flow_labels(summaries)
        yield from self._partition_families(summaries)
        yield from self._topic_families(summaries, topics)
        yield from self._flow_families(summaries, reads, labels)
        yield from self._event_families(summaries, labels)
        yield from self._alert_families(summaries, reads, labels)
        yield from self._assurance_families(summaries, topics, reads, labels)
        yield from self._operation_families()
        yield from self._worker_families()

    # -- per partition ----------------------------------------------------------------------------------
    def _partition_families(self, summaries) -> Iterator[Metric]:
        """MM2's per-partition figures of the flows exported per partition (`per_partition`): their rows
        read once, as tuples, and kept as columns (`PartitionSeries`)."""
        names = {summary.flow.pk: summary.flow.name for summary in summaries if per_partition(summary)}
        rows = list(partitions.partition_values(flow_ids=list(names))) if names else []
        flow_ids, topics, numbers, behind, seconds, age_ms, latency_ms, counts, sizes, shown = (
            zip(*rows, strict=True) if rows else ([],) * len(partitions.PARTITION_VALUES)
        )
        where = PartitionLabels(
            flows=[names[flow_id] for flow_id in flow_ids], topics=topics, partitions=numbers
        )
        with_state = where.with_state(shown)
        for name, doc, typ, labels, values in (
            ("records_behind", "Source end offset minus the next offset to replicate (docs/lag.md)", "gauge",
             where, behind),
            ("seconds_behind", "Age of the oldest source record not yet replicated: the RPO in time", "gauge",
             where, seconds),
            ("record_age_seconds", "Age of the last record polled from the source (MM2 record-age-ms)", "gauge",
             where, [_seconds(ms) for ms in age_ms]),
            ("replication_latency_seconds",
             "Record timestamp to target acknowledgement of the last record (MM2 replication-latency-ms)", "gauge",
             where, [_seconds(ms) for ms in latency_ms]),
            ("records_replicated", "Records replicated by the partition's task (MM2 record-count)", "counter",
             where, counts),
            ("bytes_replicated", "Value bytes replicated by the partition's task (MM2 byte-count)", "counter",
             where, sizes),
            ("partition_state",
             "The partition's Burrow state (STALE when its report is too old), as a label of a series valued 1",
             "gauge", with_state, [1] * len(rows)),
        ):  # fmt: skip
            yield PartitionSeries(f"mirrorplane_{name}", doc, typ, labels=labels, values=values)

    # -- per topic, every flow --------------------------------------------------------------------------
    def _topic_families(self, summaries, topics: dict[int, list[partitions.TopicStatus]]) -> Iterator[Metric]:
        """Each flow's topics, its partitions' figures rolled up in SQL: what a dashboard of any flow's size
        reads (a flow past the partition limit has no per-partition series; docs/metrics.md)."""
        records_behind = _gauge(
            "topic_records_behind", "records_behind summed over the topic's partitions", TOPIC_LABELS
        )
        bytes_behind = _gauge(
            "topic_bytes_behind",
            "Value bytes behind (records behind x average replicated record size): lost if the source vanished",
            TOPIC_LABELS,
        )
        seconds_behind = _gauge(
            "topic_seconds_behind", "The topic's worst partition's seconds_behind", TOPIC_LABELS
        )
        record_age = _gauge(
            "topic_record_age_seconds",
            "The topic's oldest last-polled record (MM2 record-age-ms)",
            TOPIC_LABELS,
        )
        latency = _gauge(
            "topic_replication_latency_seconds",
            "The topic's worst last-acknowledged record's latency (MM2 replication-latency-ms)",
            TOPIC_LABELS,
        )
        records = _counter(
            "topic_records_replicated", "Records replicated, summed over the topic's partitions", TOPIC_LABELS
        )
        bytes_ = _counter(
            "topic_bytes_replicated",
            "Value bytes replicated, summed over the topic's partitions",
            TOPIC_LABELS,
        )
        states = _gauge(
            "topic_partitions",
            "The topic's partitions per state (Burrow's, or STALE when the report is too old)",
            [*TOPIC_LABELS, "state"],
        )
        age = _gauge(
            "topic_status_age_seconds", "Seconds since the topic's oldest partition report", TOPIC_LABELS
        )
        for summary in summaries:
            name = summary.flow.name
            for topic in topics.get(summary.flow.pk, ()):
                labels = LabelSet(TOPIC_LABELS, (name, topic.topic))
                for family, value in (
                    (records_behind, topic.records_behind),
                    (bytes_behind, topic.bytes_behind),
                    (seconds_behind, topic.seconds_behind),
                    (record_age, _seconds(topic.record_age_ms)),
                    (latency, _seconds(topic.replication_latency_ms)),
                    (records, topic.record_count),
                    (bytes_, topic.byte_count),
                    (age, topic.age_s),
                ):
                    if value is not None:
                        family.add_metric(labels, value)
                for shown, count in sorted(topic.states.items()):
                    states.add_metric(labels.plus("state", shown), count)
        yield from (
            records_behind,
            bytes_behind,
            seconds_behind,
            record_age,
            latency,
            records,
            bytes_,
            states,
            age,
        )

    # -- per flow ---------------------------------------------------------------------------------------
    def _flow_families(
        self, summaries, reads: assurance.ReadinessReads, flow_labels: dict[int, LabelSet]
    ) -> Iterator[Metric]:
        state = _gauge(
            "flow_state",
            "The flow's lifecycle state, as a label of a series valued 1",
            [*FLOW_LABELS, "state"],
        )
        behind = _gauge(
            "flow_records_behind", "Records behind, summed over the flow's partitions", FLOW_LABELS
        )
        seconds = _gauge("flow_seconds_behind", "The flow's worst partition's seconds_behind", FLOW_LABELS)
        age = _gauge(
            "flow_status_age_seconds", "Seconds since the flow's newest partition report", FLOW_LABELS
        )
        stale = _gauge(
            "flow_stale", "1 when a partition of a flow that should replicate has not reported", FLOW_LABELS
        )
        health = _gauge(
            "flow_health",
            "The flow's health by the console's one rule (ok, lagging, stale, error, paused, disabled, "
            "waiting: a lag not known yet, never ok), as a label of a series valued 1",
            [*FLOW_LABELS, "health"],
        )
        latency = _histogram(
            "record_replication_latency_seconds",
            "Records by replication latency, record timestamp to target acknowledgement (MM2 "
            "replication-latency-ms as a distribution), summed over the flow's partitions",
            FLOW_LABELS,
        )
        schemas_behind = _gauge(
            "flow_schema_versions_behind",
            "Source schema versions not on the target registry after the flow's latest schema sync pass "
            "(flows that sync schemas; docs/schemas.md)",
            FLOW_LABELS,
        )
        schemas_errors = _gauge(
            "flow_schema_sync_errors",
            "Subjects the flow's latest schema sync pass could not sync (each a flow error event)",
            FLOW_LABELS,
        )
        schemas_age = _gauge(
            "flow_schema_sync_age_seconds", "Seconds since the flow's latest schema sync pass", FLOW_LABELS
        )
        pool_workers = _gauge(
            "flow_pool_workers",
            "Live workers consuming the queue of the flow's worker pool (pool: empty for the default)",
            [*FLOW_LABELS, "pool"],
        )
        aborted = _counter(
            "flow_records_aborted",
            "Transactional flows: records the target acknowledged in a transaction that was then aborted, "
            "summed over the tasks since they started (never replicated: not in mirrorplane_records_replicated)",
            FLOW_LABELS,
        )
        now = timezone.now()
        syncs = rollup.schema_sync_statuses(
            [summary.flow for summary in summaries], now=now, signals=reads.signals
        )
        for summary in summaries:
            flow = summary.flow
            labels = flow_labels[flow.pk]
            state.add_metric(labels.plus("state", flow.state), 1)
            aborted.add_metric(labels, summary.records_aborted)
            if summary.records_behind is not None:
                behind.add_metric(labels, summary.records_behind)
            if summary.seconds_behind is not None:
                seconds.add_metric(labels, summary.seconds_behind)
            if summary.age_s is not None:
                age.add_metric(labels, summary.age_s)
            stale.add_metric(labels, 1 if summary.health == "stale" else 0)
            health.add_metric(labels.plus("health", summary.health), 1)
            histogram = latency_histogram([summary])
            if histogram is not None:
                latency.add_metric(labels, *histogram)
            if summary.pool is not None and summary.pool.live_workers is not None:
                pool_workers.add_metric(labels.plus("pool", flow.pool), summary.pool.live_workers)
            schemas = syncs.get(flow.pk)
            if schemas is not None and schemas.age_s is not None:  # a pass ran (observed_at)
                schemas_behind.add_metric(labels, schemas.versions_behind or 0)
                schemas_errors.add_metric(labels, schemas.errors or 0)
                schemas_age.add_metric(labels, schemas.age_s)
        yield from (state, behind, seconds, age, stale, health, aborted, latency, pool_workers)
        yield from (schemas_behind, schemas_errors, schemas_age)

    def _event_families(self, summaries, flow_labels: dict[int, LabelSet]) -> Iterator[Metric]:
        gaps = _counter(
            "data_loss_gaps", "Source offsets gone before they were replicated, as gaps", FLOW_LABELS
        )
        lost = _counter(
            "lost_records", "Source offsets in data-loss gaps (records lost to retention)", FLOW_LABELS
        )
        errors = _counter("flow_errors", "Error events recorded for the flow", FLOW_LABELS)
        counted = (
            FlowEvent.objects.filter(kind__in=[FlowEventKind.DATA_LOSS_GAP, FlowEventKind.ERROR])
            .values("flow_id", "kind")
            .annotate(events=Count("id"), offsets=Sum(F("last_offset") - F("first_offset") + 1))
        )
        by_flow: dict[int, dict[str, tuple[int, int]]] = {}
        for row in counted:
            by_flow.setdefault(row["flow_id"], {})[row["kind"]] = (row["events"], row["offsets"] or 0)
        for flow_id, labels in flow_labels.items():
            kinds = by_flow.get(flow_id, {})
            gap_events, gap_offsets = kinds.get(FlowEventKind.DATA_LOSS_GAP, (0, 0))
            gaps.add_metric(labels, gap_events)
            lost.add_metric(labels, gap_offsets)
            errors.add_metric(labels, kinds.get(FlowEventKind.ERROR, (0, 0))[0])
        yield from (gaps, lost, errors)

    def _alert_families(
        self, summaries, reads: assurance.ReadinessReads, flow_labels: dict[int, LabelSet]
    ) -> Iterator[Metric]:
        """Runtime signals, RPO budgets and firing alerts (docs/alerts.md)."""
        now = time.time()
        ages = {
            "heartbeat_emitted_at": _gauge(
                "heartbeat_age_seconds", "Seconds since the flow last emitted a heartbeat", FLOW_LABELS
            ),
            "offset_sync_emitted_at": _gauge(
                "offset_sync_age_seconds", "Seconds since the flow last emitted an offset sync", FLOW_LABELS
            ),
            "checkpoint_emitted_at": _gauge(
                "checkpoint_age_seconds", "Seconds since the flow last emitted a checkpoint", FLOW_LABELS
            ),
        }
        checkpoint_latency = _gauge(
            "checkpoint_latency_seconds",
            "Reading the groups' source offsets to the target's ack of the newest checkpoints, the worst "
            "group's (MM2 checkpoint-latency-ms)",
            FLOW_LABELS,
        )
        tasks = _gauge("flow_tasks", "Tasks of the flow's current plan", FLOW_LABELS)
        leased = _gauge("flow_tasks_leased", "Tasks of the flow whose lease a worker holds", FLOW_LABELS)
        budget_s = _gauge("rpo_budget_seconds", "The flow's RPO budget in seconds behind", FLOW_LABELS)
        budget_r = _gauge(
            "rpo_budget_records", "The flow's RPO budget in records behind (when set)", FLOW_LABELS
        )
        firing = _gauge(
            "alerts_firing",
            "1 for each rule firing for the flow (Mirrorplane's evaluation)",
            ["flow", "rule"],
        )
        for summary in summaries:
            flow = summary.flow
            labels = flow_labels[flow.pk]
            row = reads.signals.get(flow.pk)
            if row is not None:
                for field, family in ages.items():
                    at = getattr(row, field)
                    if at is not None:
                        family.add_metric(labels, max(now - at.timestamp(), 0.0))
                if row.checkpoint_latency_ms is not None:
                    checkpoint_latency.add_metric(labels, row.checkpoint_latency_ms / 1000)
                if row.tasks_planned is not None:
                    tasks.add_metric(labels, row.tasks_planned)
                    leased.add_metric(labels, row.tasks_leased or 0)
            budget_s.add_metric(labels, summary.budget.seconds_behind)
            if summary.budget.records_behind is not None:
                budget_r.add_metric(labels, summary.budget.records_behind)
        names = {summary.flow.pk: summary.flow.name for summary in summaries}
        for flow_id, rule in Alert.objects.filter(state=AlertState.FIRING).values_list("flow_id", "rule"):
            if flow_id in names:
                firing.add_metric([names[flow_id], rule], 1)
        # The dead-man's switch: with beat or the metadata worker stopped, no rule is evaluated and no
        # alert of Mirrorplane's own can fire; Prometheus notices this age grow (or the series vanish).
        evaluation_age = _gauge(
            "alert_evaluation_age_seconds",
            "Seconds since Mirrorplane last evaluated its alert rules (absent: never, or Redis is away)",
            [],
        )
        evaluated = alerts.evaluated_at()
        if evaluated is not None:
            evaluation_age.add_metric([], max(now - evaluated, 0.0))
        yield from (
            *ages.values(),
            checkpoint_latency,
            tasks,
            leased,
            budget_s,
            budget_r,
            firing,
            evaluation_age,
        )

    def _assurance_families(
        self,
        summaries,
        topics: dict[int, list[partitions.TopicStatus]],
        reads: assurance.ReadinessReads,
        flow_labels: dict[int, LabelSet],
    ) -> Iterator[Metric]:
        """Live RPO, failover readiness and continuous verification (docs/verification.md): partitions that
        differ per topic for every flow (its roll-up: no row per partition read), per partition for the
        flows exported per partition."""
        flow_bytes = _gauge(
            "flow_bytes_behind", "Value bytes behind, summed over the flow's topics", FLOW_LABELS
        )
        over = _gauge(
            "rpo_over_budget",
            "1 when the flow's fresh figures exceed its RPO budget (absent while stale)",
            FLOW_LABELS,
        )
        score = _gauge("failover_readiness_score", "Failover readiness, 0-100", FLOW_LABELS)
        points = _gauge(
            "failover_readiness_points_lost", "Points a readiness check costs the score", ["flow", "check"]
        )
        mismatches = _gauge(
            "topic_verification_mismatches",
            "The topic's partitions whose copy differs from the source",
            TOPIC_LABELS,
        )
        verified_records = _counter(
            "verification_records_verified", "Source records verified equal to their copy", FLOW_LABELS
        )
        verified_bytes = _counter(
            "verification_bytes_read", "Bytes the verifier read from both clusters", FLOW_LABELS
        )
        checked = _gauge(
            "verification_age_seconds", "Seconds since the verifier last looked at the flow", FLOW_LABELS
        )
        records_waiting = _gauge(
            "verification_records_waiting",
            "Replicated records no verification run has verified yet (absent while the backlog is stale)",
            FLOW_LABELS,
        )
        longest_wait = _gauge(
            "verification_longest_wait_seconds",
            "Seconds the most neglected partition with records waiting has gone without a look (0: none waits)",
            FLOW_LABELS,
        )
        now = timezone.now()
        readiness = assurance.flow_readiness_all(summaries, now=now, reads=reads, every_flow=True)
        for summary in summaries:
            flow = summary.flow
            labels = flow_labels[flow.pk]
            rpo = assurance.flow_rpo(
                summary,
                budget=summary.budget,
                now=now,
                topic_statuses=topics.get(flow.pk, []),
            )
            if rpo.bytes_behind is not None:
                flow_bytes.add_metric(labels, rpo.bytes_behind)
            if rpo.over_budget is not None:
                over.add_metric(labels, 1 if rpo.over_budget else 0)
            if readiness[flow.pk].applies:  # absent where no failover may start: it would judge nothing
                found = readiness[flow.pk].readiness
                score.add_metric(labels, found.score)
                for reason in found.reasons:
                    points.add_metric([flow.name, reason.check], reason.points)
            status = reads.verifications.get(flow.pk)
            if status is None:
                continue
            differing = Counter(row.topic for row in status.mismatches)
            for topic in sorted({topic.topic for topic in topics.get(flow.pk, ())} | set(differing)):
                mismatches.add_metric([flow.name, topic], differing[topic])
            verified_records.add_metric(labels, status.records_verified)
            verified_bytes.add_metric(labels, status.bytes_read)
            if status.checked_at is not None:
                checked.add_metric(labels, rollup.age_s(status.checked_at, now=now))
            if status.backlog is not None and not status.backlog.stale:
                records_waiting.add_metric(labels, status.backlog.records_waiting)
                longest_wait.add_metric(labels, status.backlog.wait_s or 0.0)
        yield from (flow_bytes, over, score, points)
        # Per partition, for the flows exported per partition only: their rows as values, one statement.
        names = {summary.flow.pk: summary.flow.name for summary in summaries if per_partition(summary)}
        rows = PartitionVerification.objects.filter(flow_id__in=list(names)).order_by(
            "flow_id", "topic", "partition"
        )
        rows = list(rows.values_list("flow_id", "topic", "partition", "verified_up_to", "status"))
        flow_ids, topics_of, numbers, up_to, states = zip(*rows, strict=True) if rows else ([],) * 5
        where = PartitionLabels(
            flows=[names[flow_id] for flow_id in flow_ids], topics=topics_of, partitions=numbers
        )
        yield PartitionSeries(
            "mirrorplane_verified_up_to_offset",
            "Source offset (exclusive) up to which the partition's copy was verified equal",
            "gauge",
            labels=where,
            values=up_to,
        )
        yield PartitionSeries(
            "mirrorplane_verification_mismatch",
            "1 when the partition's copy differs from the source",
            "gauge",
            labels=where,
            values=[1 if state == VerificationStatus.MISMATCH else 0 for state in states],
        )
        yield from (mismatches, verified_records, verified_bytes, checked, records_waiting, longest_wait)

    # -- operations and workers -------------------------------------------------------------------------
    def _operation_families(self) -> Iterator[Metric]:
        operations = _counter(
            "operations",
            "Failover and failback operations by outcome (pending: running)",
            ["flow", "kind", "outcome"],
        )
        rows = (
            Operation.objects.values("flow__source__alias", "flow__target__alias", "kind", "outcome")
            .annotate(count=Count("id"))
            .order_by()
        )
        for row in rows:
            flow = f"{row['flow__source__alias']}->{row['flow__target__alias']}"
            operations.add_metric([flow, row["kind"], row["outcome"]], row["count"])
        yield operations

    def _worker_families(self) -> Iterator[Metric]:
        up = _gauge(
            "worker_up", "1 for each worker seen recently, by the queues it consumes", ["worker", "queues"]
        )
        seen = _gauge("worker_last_seen_seconds", "Seconds since the worker announced itself", ["worker"])
        beat = _gauge("beat_last_seen_seconds", "Seconds since beat (the supervisor) announced itself", [])
        redis_up = _gauge("redis_up", "1 when Redis (broker, leases, presence) answered this scrape", [])
        now = time.time()
        try:
            workers, beat_presence = presence.workers_seen(), presence.beat_seen()
        except Exception:
            redis_up.add_metric([], 0)
            yield redis_up
            return
        redis_up.add_metric([], 1)
        slices = _counter(
            "worker_slices", "Replication slices the worker process ran since it started", ["worker"]
        )
        slice_errors = _counter("worker_slice_errors", "Slices that failed or reported errors", ["worker"])
        leases = _gauge("worker_leases_held", "Replication tasks whose lease the worker holds", ["worker"])
        for worker in workers:
            up.add_metric([worker.name, ",".join(worker.queues)], 1)
            seen.add_metric([worker.name], worker.age_s(now))
            if "slices" in worker.stats:
                slices.add_metric([worker.name], worker.stats["slices"])
                slice_errors.add_metric([worker.name], worker.stats.get("slice_errors", 0))
                leases.add_metric([worker.name], worker.stats.get("leases_held", 0))
        if beat_presence is not None:
            beat.add_metric([], beat_presence.age_s(now))
        yield from (up, seen, slices, slice_errors, leases, beat, redis_up)


def families() -> bytes:
    """The text of every family, read from the database now (with the cycle collector paused:
    `text.render_text`)."""
    return render_text(MirrorplaneCollector().collect()).encode()


def web_processes() -> bytes:
    """The web processes' own metrics when prometheus-client's multiprocess mode is on (else nothing)."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return b""
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry)
    return generate_latest(registry)


def exposition() -> bytes:
    """Every family read now, and the web processes' own (what a scrape answers with rendering off)."""
    return families() + web_processes()
