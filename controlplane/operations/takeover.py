"""Take over a flow from a stopped MirrorMaker 2 (an MM2 import step), as a durable `Operation` (kind
`takeover`): its dry run, then apply.

After importing the MM2 file, the operator stops MM2 and requests the dry run (`takeover_request`,
operator, audited, refusals too; rate-limited per user like the failover plan); a worker on the
`operations` queue runs it (`run`, from `controlplane.operations.runner.run_operation`): it reads MM2's Connect
offsets topic partition by partition (progress per partition, the lease renewed at each), its offset
syncs and checkpoints, and keeps per source partition where replication resumes
(`replication.takeover`: after MM2's committed Connect offset, or past what MM2's newest offset sync
proves is already on the target) in `result["plan"]`. Nothing is written.

Apply (`dry_run` false, best from a finished dry run: `from_dry_run`) needs a flow that does not
replicate (disabled or paused; checked at the request and again, under the flow's row lock, before the
write). It reads MM2's state again; it is refused (outcome `refused`, nothing changed) when the plan has
problems, when the resume points or the remote partitions' ends differ from the dry run's, or when the
remote partitions grow between that read and the write (MM2 still writes). Then it stores the positions
in Mirrorplane's position topic (`replication.takeover_reads`, through the ports: a failed write is put back) and keeps
them, and the ones they replaced, in `result`. Every phase is idempotent: a worker that takes the
operation over reads again from the start. The flow then starts exactly where MM2 stopped, and MM2's
offset syncs and checkpoints (same topics, same bytes) carry on.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.browse import topic_name_error
from controlplane.core.errors import ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.flows import engine
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster, Flow, FlowState
from controlplane.operations import requests
from controlplane.operations.models import Operation, OperationKind, OperationOutcome, OperationPhase
from replication.cluster_ports import Mm2StillWriting, TakeoverError
from replication.takeover import MM2_SOURCE_CONNECTOR, TakeoverPlan, mm2_offsets_topic
from replication.topic_partition import partition_label

TAKEOVER_STATES = frozenset({FlowState.DISABLED, FlowState.PAUSED})
KIND = OperationKind.TAKEOVER
Phase = OperationPhase
Step = Callable[..., None]


class TakeoverRefused(requests.ChecksFailed):
    """What MM2's state says forbids storing positions now (outcome `refused`): nothing changed."""


def plan_summary(plan: TakeoverPlan) -> dict:
    """The dry run as the API, the page and the command line show it (JSON)."""
    return {
        "flow": plan.flow,
        "offsets_topic": plan.offsets_topic,
        "connector": plan.connector,
        "mm2_positions": plan.mm2_positions,
        "offset_syncs_topic": plan.offset_syncs_topic,
        "offset_syncs": plan.offset_syncs,
        "checkpoints_topic": plan.checkpoints_topic,
        "checkpoint_groups": plan.checkpoint_groups,
        "skipped_records": plan.skipped_records,
        "problems": plan.problems(),
        "partitions": [
            {
                "topic": point.topic,
                "partition": point.partition,
                "remote_topic": point.remote_topic,
                "next_offset": point.next_offset,
                "mm2_next_offset": point.mm2_next_offset,
                "already_on_target": point.already_on_target,
                "current_next_offset": point.current_next_offset,
                "source_start": point.source_start,
                "source_end": point.source_end,
                "target_end": point.target_end,
                "records_to_copy": point.records_to_copy,
                "records_lost": point.records_lost,
                "basis": point.basis,
            }
            for point in plan.partitions
        ],
    }


def _check_inputs(*, offsets_topic: str, connector: str, mm2_source_alias: str = "") -> None:
    errors: dict[str, list[str]] = {}
    given = {"offsets_topic": offsets_topic, "connector": connector, "mm2_source_alias": mm2_source_alias}
    for name, value in given.items():
        if "\x00" in value:
            errors[name] = ["holds a NUL character: give the name as MM2's file spells it"]
    if errors:
        raise ServiceValidationError(errors)
    if offsets_topic and (problem := topic_name_error(offsets_topic)):
        errors["offsets_topic"] = [f"{problem}: give MM2's offset.storage.topic"]
    if not connector.strip():
        errors["connector"] = [
            "empty: give the MirrorSourceConnector's name (MirrorSourceConnector in MM2's dedicated mode)"
        ]
    if errors:
        raise ServiceValidationError(errors)


def _dry_run_of(flow: Flow, operation_id: int) -> Operation:
    """The finished dry run an apply stores: this flow's, a takeover's, succeeded."""
    dry_run = Operation.objects.filter(
        pk=operation_id, flow=flow, kind=KIND, dry_run=True, outcome=OperationOutcome.SUCCEEDED
    ).first()
    if dry_run is None:
        raise ServiceValidationError.single(
            "from_dry_run",
            f"operation {operation_id} is not a finished takeover dry run of {flow.name}: run the dry run, "
            "then apply it",
        )
    return dry_run


# -- request ----------------------------------------------------------------------------------------------
def takeover_request(
    *,
    actor,
    flow: Flow,
    dry_run: bool = True,
    offsets_topic: str = "",
    connector: str = MM2_SOURCE_CONNECTOR,
    mm2_source_alias: str = "",
    from_dry_run: int | None = None,
) -> Operation:
    """Queue the dry run (or, `dry_run` false, the apply) of taking `flow` over from MM2. `offsets_topic`:
    MM2's `offset.storage.topic` (default `mm2-offsets.<source>.internal`); `connector`: the
    MirrorSourceConnector's name; `mm2_source_alias`: the source alias MM2 used, when it differs from the
    flow's; `from_dry_run`: the finished dry run an apply stores (its inputs are used, and its resume
    points must still hold). Operators only (the command line, no actor, runs as the system); refused,
    and audited, like a failover request: bad inputs, an apply of a flow that replicates, another
    operation of the flow active (OperationActive)."""
    with requests.locked_request(actor=actor, kind=KIND, flow=flow, rate_limit="mm2_takeover") as flow:
        inputs = {
            "offsets_topic": offsets_topic.strip(),
            "connector": connector.strip(),
            "mm2_source_alias": mm2_source_alias.strip(),
        }
        stores = from_dry_run if from_dry_run is not None and not dry_run else None
        if stores is not None:
            stored = _dry_run_of(flow, stores).result["request"]
            inputs = {name: stored[name] for name in inputs}
        _check_inputs(**inputs)
        request: dict[str, str | int | None] = {**inputs, "from_dry_run": stores}
        requests.refuse_if_active(flow)
        if not dry_run and (refusal := apply_refusal(flow)):
            raise ServiceConflict(refusal)
        return requests.queue(
            actor=actor,
            kind=KIND,
            flow=flow,
            fields={
                "dry_run": dry_run,
                "client_timeout_s": settings.MIRRORPLANE_CLUSTER_TIMEOUT_S,
                "result": {"request": request},
            },
            audited={"dry_run": dry_run, **request},
            detail=f": take over from MM2{' (dry run)' if dry_run else ''}",
        )


# -- running ----------------------------------------------------------------------------------------------
def run(operation: Operation, step: Step) -> None:
    """Read MM2's state (the dry run's plan); an apply then checks it and stores the positions."""
    plan = _read(operation, step)
    if operation.dry_run:
        step(message=f"dry run: {len(plan.partitions)} partition(s) read, nothing changed")
        return
    if problems := plan.problems():
        raise TakeoverRefused(f"offsets_topic: {' '.join(problems)}")
    _check_dry_run_holds(operation, plan)
    _store(operation, step, plan)


def _read(operation: Operation, step: Step) -> TakeoverPlan:
    request, flow = operation.result["request"], operation.flow
    offsets_topic = request["offsets_topic"] or default_offsets_topic(flow)
    step(phase=Phase.PLANNING, progress=0.0, message=f"reading MM2's state from {offsets_topic}")

    def progress(done: int, total: int) -> None:
        if requests.STOPPING.is_set():  # a warm shutdown: another worker reads it again
            raise requests.HandedOver()
        step(
            progress=round(0.8 * done / max(total, 1), 4),
            message=f"reading {offsets_topic}: {done} of {total} partition(s)",
        )

    try:
        plan = clusters().read_takeover_plan(
            engine.flow_to_config(flow),
            source=engine.cluster_to_config(flow.source),
            target=engine.cluster_to_config(flow.target),
            known_aliases=tuple(Cluster.objects.values_list("alias", flat=True)),
            offsets_topic=request["offsets_topic"] or None,
            connector=request["connector"],
            mm2_source_alias=request["mm2_source_alias"] or None,
            timeout_s=operation.client_timeout_s,
            progress=progress,
        )
    except TakeoverError as exc:
        if exc.field:
            raise TakeoverRefused(f"{exc.field}: {exc}") from exc
        raise ClusterUnavailable(str(exc)) from exc
    result = {**operation.result, "plan": plan_summary(plan), "observed_at": timezone.now().isoformat()}
    step(result=result, progress=0.9, message=f"MM2's state read: {len(plan.partitions)} partition(s)")
    return plan


def _check_dry_run_holds(operation: Operation, plan: TakeoverPlan) -> None:
    """The apply stores what the operator read: refused when a resume point or a remote partition's end
    differs from the dry run's."""
    dry_run_id = operation.result["request"].get("from_dry_run")
    if dry_run_id is None:
        return
    shown = Operation.objects.get(pk=dry_run_id).result["plan"]["partitions"]
    was = {(row["topic"], row["partition"]): (row["next_offset"], row["target_end"]) for row in shown}
    now = {(p.topic, p.partition): (p.next_offset, p.target_end) for p in plan.partitions}
    changed = sorted(key for key in was.keys() | now.keys() if was.get(key) != now.get(key))
    if changed:
        named = ", ".join(_change(key, was.get(key), now.get(key)) for key in changed[:5])
        raise TakeoverRefused(
            f"the resume points or the remote partitions changed since dry run {dry_run_id} ({named}"
            f"{', ...' if len(changed) > 5 else ''}): MM2 still writes? Stop it, run the dry run again and "
            "apply that"
        )


def _change(key: tuple[str, int], was: tuple | None, now: tuple | None) -> str:
    (was_next, was_end), (now_next, now_end) = was or (None, None), now or (None, None)
    return f"{partition_label(*key)} resumes at {was_next} -> {now_next}, remote end {was_end} -> {now_end}"


def _store(operation: Operation, step: Step, plan: TakeoverPlan) -> None:
    step(phase=Phase.STORING, message="storing the resume positions")
    with transaction.atomic():
        flow = Flow.objects.select_for_update().select_related("source", "target").get(pk=operation.flow_id)
        if refusal := apply_refusal(flow):  # resumed since the request
            raise TakeoverRefused(refusal)
        try:
            positions = clusters().apply_takeover(
                plan,
                target=engine.cluster_to_config(flow.target),
                source_alias=flow.source.alias,
                timeout_s=operation.client_timeout_s,
            )
        except Mm2StillWriting as exc:
            raise TakeoverRefused(str(exc)) from exc
        except TakeoverError as exc:
            raise ClusterUnavailable(str(exc)) from exc
        written = {partition_label(*key): offset for key, offset in sorted(positions.items())}
        before = {
            partition_label(p.topic, p.partition): p.current_next_offset
            for p in plan.partitions
            if (p.topic, p.partition) in positions
        }
        step(
            result={**operation.result, "written": written, "before": before},
            message=f"{len(written)} position(s) stored: resume the flow to start replicating",
        )


def default_offsets_topic(flow: Flow) -> str:
    return mm2_offsets_topic(flow.source.alias)


def apply_refusal(flow: Flow) -> str | None:
    """Why apply would be refused now because of the flow's state (None when it may be applied)."""
    if flow.state in TAKEOVER_STATES:
        return None
    return (
        f"{flow.name} is {flow.state}: stop MM2, pause (or disable) the flow, then take it over; "
        "positions written under a replicating flow would be overwritten by it"
    )
