"""Migration cutover: moving to the target cluster for good, as a durable `Operation` (kind `cutover`).

A request (`cutover_request`: operator, the flow's name typed to confirm, audited) queues it; a worker
runs its steps in order, each recorded with its evidence in `result["steps"]` before the next starts, so
a worker that takes over resumes at the first step not passed:

1. `lag` (planning): the failover plan for every group the flow selects on the source: both clusters
   answer, no group is active on the target (their offsets could not be written), the lag now;
2. `fence` (fencing): the operator has stopped the producers; the source's end offsets of every
   replicated partition must stay still for `fence_s` seconds. While they move the step waits, up to
   `fence_timeout_s`, then refuses (outcome `refused`, the partitions that moved and by how much): nothing
   changed. Once still: `lifecycle.begin_cutover` (MIGRATING, a runnable state);
3. `drain` (draining): every record now on the source is copied, with its offset sync (up to
   `drain_timeout_s`);
4. `verify` (verifying): every drained partition compared with its copy over the source range not yet
   verified by the continuous verifier (its `verified_up_to`, `controlplane.assurance.verification`) up to the
   drained end, range by range (`replication.cluster_ports.FlowRanges`: counts and digests of key,
   value, headers and timestamp); a mismatch fails the cutover, named;
5. `offsets` (moving_groups): exact translated offsets written on the target for every group, never
   backwards, never for a group active there;
then `lifecycle.complete_cutover` (MIGRATED: nothing replicates any more) and `clients`: which consumer
groups and producers to switch to the target, and to what topic names.

A dry run checks every step and writes nothing: no state change, one look at the drain, the ranges
replicated so far verified, the offsets that would be written shown. A failure after the fence returns
the flow to where it was (`lifecycle.abort_cutover`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from controlplane.assurance import verification
from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.flows import engine, lifecycle
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster, Flow
from controlplane.operations import drain, failover, requests
from controlplane.operations.models import Operation, OperationKind, OperationPhase
from controlplane.status import rollup, runtime
from replication import failover as failover_rules
from replication import failover_reads
from replication.cluster_ports import FlowClusters, FlowRanges, RangeNotReadable
from replication.cutover import FenceWatch
from replication.topic_partition import partition_label
from replication.verification import OffsetRange, VerificationLimits

DEFAULT_FENCE_S = 10.0
MAX_FENCE_S = 600.0
DEFAULT_FENCE_TIMEOUT_S = 300.0
MAX_FENCE_TIMEOUT_S = 3600.0
FENCE_POLL_S = 0.5
STEPS = ("lag", "fence", "drain", "verify", "offsets", "clients")
Phase = OperationPhase
Step = Callable[..., None]


class CutoverFailed(ServiceConflict):
    """A step found what must not be cut over (a range that differs, a group refused): named."""


# -- request ----------------------------------------------------------------------------------------------
def cutover_request(
    *,
    actor,
    flow: Flow,
    confirm: str,
    dry_run: bool = False,
    fence_s: float = DEFAULT_FENCE_S,
    fence_timeout_s: float = DEFAULT_FENCE_TIMEOUT_S,
    drain_timeout_s: float = requests.DEFAULT_DRAIN_TIMEOUT_S,
) -> Operation:
    """Queue a cutover (or its dry run) of `flow`; refused, and audited, like a failover request."""
    kind = OperationKind.CUTOVER
    with requests.locked_request(actor=actor, kind=kind, flow=flow) as flow:
        requests.check_confirmation(flow=flow, confirm=confirm)
        requests.check_drain_timeout(drain_timeout_s)
        if not 0 < fence_s <= MAX_FENCE_S:
            raise ServiceValidationError.single(
                "fence_s", f"give how long the source must stay still, between 0 and {MAX_FENCE_S:g} seconds"
            )
        if not fence_s <= fence_timeout_s <= MAX_FENCE_TIMEOUT_S:
            raise ServiceValidationError.single(
                "fence_timeout_s",
                f"give how long to wait for the source to stay still, from fence_s ({fence_s:g}) to "
                f"{MAX_FENCE_TIMEOUT_S:g} seconds",
            )
        requests.refuse_if_active(flow)
        requests.check_allowed(flow=flow, kind=kind)
        fields = {
            "dry_run": dry_run,
            "fence_s": fence_s,
            "fence_timeout_s": fence_timeout_s,
            "drain_timeout_s": drain_timeout_s,
        }
        return requests.queue(
            actor=actor,
            kind=kind,
            flow=flow,
            fields=fields,
            audited=fields,
            detail=" (dry run)" if dry_run else "",
        )


# -- evidence ---------------------------------------------------------------------------------------------
def _passed(operation: Operation, name: str) -> bool:
    return any(s["step"] == name and s["status"] != "fail" for s in (operation.result or {}).get("steps", []))


def _record(operation: Operation, step: Step, name: str, status: str, summary: str, evidence: dict) -> None:
    """Store a step's outcome and evidence (replacing an earlier attempt's), before the next step."""
    result = dict(operation.result or {})
    steps = [s for s in result.get("steps", []) if s["step"] != name]
    steps.append(
        {
            "step": name,
            "status": status,
            "summary": summary,
            "evidence": evidence,
            "observed_at": timezone.now().isoformat(),
        }
    )
    result["steps"] = sorted(steps, key=lambda s: STEPS.index(s["step"]))
    step(result=result, message=f"{name}: {summary}"[:500])


# -- running ----------------------------------------------------------------------------------------------
def run(operation: Operation, step: Step) -> None:
    reader = engine.flow_reader(operation.flow)
    try:
        for name, run_step in (
            ("lag", _check_lag),
            ("fence", _watch_fence),
            ("drain", _drain),
            ("verify", _verify),
            ("offsets", _write_offsets),
        ):
            if not _passed(operation, name):
                run_step(operation, step, reader)
        _clients(operation, step, reader)
    finally:
        reader.close()
    if not operation.dry_run:
        lifecycle.complete_cutover(flow=operation.flow)


def _check_lag(operation: Operation, step: Step, reader: FlowClusters) -> None:
    step(phase=Phase.PLANNING, message="reading both clusters: lag, consumer groups")
    plan, _ = failover_reads.read_plan(
        reader,
        groups=None,
        last_known_lag=rollup.last_known_lag(flow=operation.flow),
        arrival_window_s=0,  # the fence watches the producers, for fence_s
    )
    step(
        plan=failover.plan_summary(plan),
        records_at_risk=plan.records_at_risk,
        source_reachable=plan.source_reachable,
        groups=[g.group for g in plan.groups],
    )
    behind = sorted(
        (p for p in plan.partitions if p.records_at_risk), key=lambda p: -(p.records_at_risk or 0)
    )
    evidence = {
        "records_behind": plan.records_at_risk,
        "seconds_behind": plan.seconds_behind,
        "partitions_behind": {partition_label(p.topic, p.partition): p.records_at_risk for p in behind[:20]},
        "groups": len(plan.groups),
        "checks": {item.check.value: item.status.value for item in plan.checklist},
    }
    blocking = [
        item
        for item in plan.checklist
        if item.status == failover_rules.CheckStatus.FAIL
        and item.check
        in (
            failover_rules.Check.SOURCE_REACHABLE,
            failover_rules.Check.TARGET_HEALTHY,
            failover_rules.Check.GROUPS_INACTIVE_ON_TARGET,
        )
    ]
    if blocking:
        reasons = "; ".join(f"{item.check.value}: {item.explanation}" for item in blocking)
        _record(operation, step, "lag", "fail", reasons, evidence)
        raise requests.ChecksFailed(f"the cutover cannot start: {reasons}")
    lagging = plan.records_at_risk or 0
    summary = f"{lagging} record(s) behind now: the drain copies them" if lagging else "no lag"
    _record(operation, step, "lag", "warn" if lagging else "pass", summary, evidence)


def _watch_fence(operation: Operation, step: Step, reader: FlowClusters) -> None:
    """Wait until the source's end offsets stay still for fence_s (refused past fence_timeout_s)."""
    step(phase=Phase.FENCING, message=f"watching {reader.source.alias}'s end offsets stay still")
    partitions = reader.replicated_partitions()
    watch = FenceWatch(
        still_s=operation.fence_s,
        started=time.monotonic(),
        ends=reader.end_offsets(reader.source, partitions),
    )
    while True:
        if requests.STOPPING.wait(FENCE_POLL_S):
            raise requests.HandedOver()
        now = time.monotonic()
        watch.observe(reader.end_offsets(reader.source, partitions), now=now)
        if watch.fenced(now=now):
            break
        if now - watch.started >= operation.fence_timeout_s:
            summary = (
                f"producers still write: {sum(watch.appended.values())} record(s) appended on "
                f"{len(watch.appended)} partition(s) of {reader.source.alias} in {now - watch.started:.0f} s; "
                f"stop them (the source must stay still for {operation.fence_s:g} s) and run the cutover again"
            )
            _record(operation, step, "fence", "fail", summary, watch.evidence(now=now))
            raise requests.ChecksFailed(summary)
        step(message=f"fencing: still for {now - watch.still_since:.0f} of {operation.fence_s:g} s")
    if not operation.dry_run:
        if not operation.previous_state:
            operation.flow.refresh_from_db(fields=["state"])
            step(previous_state=operation.flow.state)
        lifecycle.begin_cutover(flow=operation.flow)
    step(drain_partitions=drain.drain_rows(partitions, watch.ends))
    _record(
        operation,
        step,
        "fence",
        "pass",
        f"{reader.source.alias} still for {operation.fence_s:g} s on {len(partitions)} partition(s)",
        watch.evidence(now=time.monotonic()) | {"end_offsets_total": sum(watch.ends.values())},
    )


def _drain(operation: Operation, step: Step, reader: FlowClusters) -> None:
    rows = operation.drain_partitions
    partitions = {(row["topic"], row["partition"]): row["remote_topic"] for row in rows}
    ends = {(row["topic"], row["partition"]): row["end"] for row in rows if row["end"] is not None}
    if operation.dry_run:
        step(phase=Phase.DRAINING, message="one look at what is still to copy")
        progress = failover_reads.observe_drain(
            reader, partitions=partitions, ends_at_start=ends, producers_stopped=True
        )
        summary = (
            "nothing left to copy"
            if progress.done
            else f"{progress.records_remaining} record(s) still to copy: the cutover waits for them"
        )
        _record(operation, step, "drain", "pass" if progress.done else "warn", summary, progress.to_dict())
        return
    step(phase=Phase.DRAINING, message="draining")
    drain.drain(operation, step, reader, producers_stopped=True)
    elapsed = (operation.drain_observed_at - operation.drain_started_at).total_seconds()
    _record(
        operation,
        step,
        "drain",
        "pass",
        f"every record on the source is on {reader.target.alias}, with its offset sync",
        {
            "records_at_start": operation.drain_records_at_start,
            "seconds": round(elapsed, 1),
            "partitions": len(rows),
        },
    )


def _verify(operation: Operation, step: Step, reader: FlowClusters) -> None:
    """Each partition's range from where the continuous verifier got to, up to the drained end."""
    step(phase=Phase.VERIFYING, message="comparing the drained ranges, source against target")
    flow = operation.flow
    verifier = clusters().flow_verifier(
        flow=engine.flow_to_config(flow),
        source=engine.cluster_to_config(flow.source),
        target=engine.cluster_to_config(flow.target),
        known_aliases=list(Cluster.objects.values_list("alias", flat=True)),
        timeout_s=reader.timeout_s,
        schema_ids=lambda: runtime.rewritten_schema_ids(flow_id=flow.pk, mode=flow.schemas_sync_mode),
    )
    limits = VerificationLimits()
    summary = verification.verification_status(flow=flow)
    evidence: dict[str, Any] = {}
    try:
        verifier.refresh_syncs()
        rows = operation.drain_partitions
        listed = verifier.partition_ends(
            [(row["topic"], row["partition"], row["remote_topic"]) for row in rows]
        )
        for row in rows:
            topic, partition, remote = row["topic"], row["partition"], row["remote_topic"]
            if (topic, partition) not in listed:
                raise CutoverFailed(
                    f"{flow.source.alias} did not list {partition_label(topic, partition)}'s offsets: run the "
                    "cutover again"
                )
            end = row["end"] or 0
            if operation.dry_run:  # only what is copied (and synced) so far
                newest = verifier.store.newest_sync(topic, partition)
                end = min(end, newest.upstream_offset + 1) if newest else 0
            oldest = verifier.store.oldest_upstream_offset(topic, partition)
            low = max(oldest or 0, listed[(topic, partition)].log_start)
            already = summary.verified_up_to(topic, partition)
            start = max(low, already or low)
            if start >= end:
                evidence[partition_label(topic, partition)] = {
                    "verified_before": already,
                    "from": start,
                    "to": end,
                    "records": 0,
                }
                continue
            if oldest is None:
                raise CutoverFailed(
                    f"{partition_label(topic, partition)} has records but no offset sync: nothing proves its copy"
                )
            evidence[partition_label(topic, partition)] = _verify_partition(
                verifier, step, topic, partition, remote, OffsetRange(start, end), limits, already
            )
    finally:
        verifier.close()
    records = sum(e["records"] for e in evidence.values())
    _record(
        operation,
        step,
        "verify",
        "pass",
        f"{records} record(s) on {len(evidence)} partition(s) equal on both sides (counts and digests)",
        {"partitions": evidence},
    )


def _verify_partition(
    verifier: FlowRanges,
    step: Step,
    topic: str,
    partition: int,
    remote: str,
    offsets: OffsetRange,
    limits: VerificationLimits,
    already: int | None,
) -> dict:
    source_digest, target_digest = hashlib.sha256(), hashlib.sha256()
    records = copies = 0
    start = offsets.start
    while start < offsets.end:
        chunk = OffsetRange(start, min(start + limits.range_records, offsets.end))
        try:
            verdict = verifier.verify_range(topic, partition, remote, chunk, limits=limits)
        except (RangeNotReadable, TimeoutError) as exc:
            raise CutoverFailed(
                f"verifying {partition_label(topic, partition)} {chunk}: {exc}; run the cutover again"
            ) from exc
        if verdict.mismatch is not None:
            message = verdict.mismatch.message(topic=topic, partition=partition, remote_topic=remote)
            raise CutoverFailed(
                f"the copy differs: {message}; the cutover stops (the flow is back where it was)"
            )
        source_digest.update(verdict.source_digest.encode())
        target_digest.update(verdict.target_digest.encode())
        records, copies = records + verdict.source_count, copies + verdict.target_count
        start = chunk.end
        step()
    return {
        "verified_before": already,
        "from": offsets.start,
        "to": offsets.end,
        "records": records,
        "copies": copies,
        "source_digest": source_digest.hexdigest(),
        "target_digest": target_digest.hexdigest(),
    }


def _write_offsets(operation: Operation, step: Step, reader: FlowClusters) -> None:
    if operation.dry_run:
        step(phase=Phase.MOVING_GROUPS, message="the offsets a cutover would write (dry run: none written)")
        remote_topics = {topic: remote for (topic, _), remote in reader.replicated_partitions().items()}
        plans = failover_reads.group_plans_from_source(
            reader, groups=operation.groups, remote_topics=remote_topics
        )
        would = {
            plan.group: {
                partition_label(*key): offset for key, offset in sorted(plan.offsets_to_write().items())
            }
            for plan in plans
        }
        consumes = {plan.group: sorted({row.topic for row in plan.partitions}) for plan in plans}
        _record(
            operation,
            step,
            "offsets",
            "pass",
            f"{len(would)} group(s): offsets to write shown",
            {"groups": would, "consumes": consumes},
        )
        return
    failover.move_groups_to_target(operation, step, reader)
    results = list(operation.group_results.all())
    evidence = {
        "groups": {
            r.group: {"outcome": r.outcome, "written": r.written, "detail": r.detail} for r in results
        },
        "consumes": {r.group: sorted(r.topics) for r in results},
    }
    refused = [r for r in results if r.outcome == "refused"]
    if refused:
        reasons = "; ".join(f"{r.group}: {r.detail}" for r in refused)
        _record(operation, step, "offsets", "fail", reasons, evidence)
        raise CutoverFailed(f"offsets not written for {len(refused)} group(s): {reasons}")
    _record(
        operation, step, "offsets", "pass", f"exact offsets written for {len(results)} group(s)", evidence
    )


def _step_evidence(operation: Operation, name: str) -> dict:
    return next((s["evidence"] for s in (operation.result or {}).get("steps", []) if s["step"] == name), {})


def _clients(operation: Operation, step: Step, reader: FlowClusters) -> None:
    """Which clients to switch to the target, and to what names (remote topics may be renamed): the
    consumer groups are those the `offsets` step planned (a dry run) or moved, as it recorded them."""
    flow = operation.flow
    remote_topics = dict(sorted({t: r for (t, _), r in reader.replicated_partitions().items()}.items()))
    consumes = _step_evidence(operation, "offsets").get("consumes")
    if consumes is None:  # recorded by a worker of the version before: its groups moved are on the rows
        consumes = {r.group: r.topics for r in operation.group_results.all()}
    consumers = [
        {"group": group, "topics": sorted(remote_topics.get(t, t) for t in topics)}
        for group, topics in sorted(consumes.items())
    ]
    renamed = {t: r for t, r in remote_topics.items() if t != r}
    evidence = {
        "bootstrap_servers": flow.target.bootstrap_servers,
        "consumers": consumers,
        "producers": [{"topic": t, "write_to": r} for t, r in remote_topics.items()],
        "renamed_topics": renamed,
    }
    note = (
        f"; topics are named differently on {flow.target.alias} ({len(renamed)} renamed by the replication "
        "policy): point clients at the new names"
        if renamed
        else ""
    )
    verb = "would switch" if operation.dry_run else "switch"
    _record(
        operation,
        step,
        "clients",
        "pass",
        f"{verb} {len(consumers)} consumer group(s) and the producers of {len(remote_topics)} topic(s) to "
        f"{flow.target.alias} ({flow.target.bootstrap_servers}){note}",
        evidence,
    )
