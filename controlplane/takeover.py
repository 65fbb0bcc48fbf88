"""Take over a flow from a running MirrorMaker 2 (an MM2 import step): the dry run, then apply.

After importing the MM2 file, the operator stops MM2 and reads the dry run: per source partition, where
replication resumes (`replication.takeover`: after MM2's committed Connect offset, or past what MM2's
newest offset sync proves is already on the target) and how many records MM2 had copied past its last
commit. Apply stores those positions in Mirrorplane's position topic; the flow then starts exactly where
MM2 stopped, and MM2's offset syncs and checkpoints (same topics, same bytes) carry on.

Both read the clusters with bounded timeouts, like the failover plan (rate-limited per user). Apply
needs the operator role and a flow that does not replicate (disabled or paused), holds the flow's row
while it writes, and is audited, refusals too. On any error nothing stored changes: the database
transaction rolls back and a failed positions write is undone (`replication.kafka.takeover_io`).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from controlplane import engine, ratelimit, services
from controlplane.browse import topic_name_error
from controlplane.errors import ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.models import AuditAction, AuditOutcome, Cluster, Flow, FlowState
from controlplane.roles import Role, role_of
from replication.kafka.takeover_io import (
    Mm2StillWriting,
    TakeoverError,
    apply_takeover,
    read_takeover_plan,
)
from replication.takeover import MM2_SOURCE_CONNECTOR, TakeoverPlan, mm2_offsets_topic

TAKEOVER_STATES = frozenset({FlowState.DISABLED, FlowState.PAUSED})


@dataclass
class TakeoverResult:
    flow: Flow
    plan: TakeoverPlan
    dry_run: bool
    applied: bool = False
    written: dict[str, int] = field(default_factory=dict)
    observed_at: datetime.datetime = field(default_factory=timezone.now)  # when MM2's state was read

    def to_dict(self) -> dict:
        plan = self.plan
        return {
            "flow": plan.flow,
            "dry_run": self.dry_run,
            "applied": self.applied,
            "observed_at": self.observed_at.isoformat(),
            "offsets_topic": plan.offsets_topic,
            "connector": plan.connector,
            "mm2_positions": plan.mm2_positions,
            "offset_syncs_topic": plan.offset_syncs_topic,
            "offset_syncs": plan.offset_syncs,
            "checkpoints_topic": plan.checkpoints_topic,
            "checkpoint_groups": plan.checkpoint_groups,
            "skipped_records": plan.skipped_records,
            "problems": plan.problems(),
            "written": self.written,
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


def _position_key(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"


def _refuse(*, actor, flow: Flow, dry_run: bool, exc: Exception) -> None:
    if not dry_run:
        services.audit_record(
            actor=actor,
            action=AuditAction.IMPORT,
            object_type="flow",
            object_id=flow.pk,
            object_repr=flow.name,
            outcome=AuditOutcome.REFUSED,
            detail=f"take over from MM2: {exc}",
        )


def _check_inputs(*, offsets_topic: str, connector: str) -> None:
    errors: dict[str, list[str]] = {}
    if offsets_topic and (problem := topic_name_error(offsets_topic)):
        errors["offsets_topic"] = [f"{problem}: give MM2's offset.storage.topic"]
    if not connector.strip():
        errors["connector"] = [
            "empty: give the MirrorSourceConnector's name (MirrorSourceConnector in MM2's dedicated mode)"
        ]
    if errors:
        raise ServiceValidationError(errors)


def _read_plan(flow: Flow, *, offsets_topic: str, connector: str, mm2_source_alias: str) -> TakeoverPlan:
    try:
        return read_takeover_plan(
            engine.flow_to_config(flow),
            source=engine.cluster_to_config(flow.source),
            target=engine.cluster_to_config(flow.target),
            known_aliases=tuple(Cluster.objects.values_list("alias", flat=True)),
            offsets_topic=offsets_topic or None,
            connector=connector,
            mm2_source_alias=mm2_source_alias or None,
            timeout_s=settings.MIRRORPLANE_CLUSTER_TIMEOUT_S,
        )
    except TakeoverError as exc:
        if exc.field:
            raise ServiceValidationError.single(exc.field, str(exc)) from exc
        raise ClusterUnavailable(str(exc)) from exc


def mm2_takeover(
    *,
    actor,
    flow: Flow,
    dry_run: bool = True,
    offsets_topic: str = "",
    connector: str = MM2_SOURCE_CONNECTOR,
    mm2_source_alias: str = "",
) -> TakeoverResult:
    """Read (dry run) or apply taking `flow` over from MM2. `offsets_topic`: MM2's `offset.storage.topic`
    (default `mm2-offsets.<source>.internal`); `connector`: the MirrorSourceConnector's name;
    `mm2_source_alias`: the source alias MM2 used, when it differs from the flow's. Operators only; the
    command line (no actor) runs as the system."""
    role = role_of(actor) if actor is not None else Role.ADMIN
    if role is None or role < Role.OPERATOR:
        exc = PermissionDenied(
            "taking a flow over from MM2 needs the operator role; you have "
            f"{'no role' if role is None else 'the ' + role.group_name + ' role'}"
        )
        _refuse(actor=actor, flow=flow, dry_run=dry_run, exc=exc)
        raise exc
    try:
        _check_inputs(offsets_topic=offsets_topic, connector=connector)
        ratelimit.hit(
            scope="mm2_takeover",
            user_id=getattr(actor, "pk", None),
            limit=settings.FAILOVER_PLAN_RATE_PER_MINUTE,
            window_s=60,
        )
        if dry_run:
            plan = _read_plan(
                flow, offsets_topic=offsets_topic, connector=connector, mm2_source_alias=mm2_source_alias
            )
            return TakeoverResult(flow=flow, plan=plan, dry_run=True)
        return _apply(
            actor=actor,
            flow=flow,
            offsets_topic=offsets_topic,
            connector=connector,
            mm2_source_alias=mm2_source_alias,
        )
    except (ServiceValidationError, ServiceConflict, ClusterUnavailable) as exc:
        _refuse(actor=actor, flow=flow, dry_run=dry_run, exc=exc)
        raise


def _apply(*, actor, flow: Flow, offsets_topic: str, connector: str, mm2_source_alias: str) -> TakeoverResult:
    with transaction.atomic():
        flow = Flow.objects.select_for_update().select_related("source", "target").get(pk=flow.pk)
        if refusal := apply_refusal(flow):
            raise ServiceConflict(refusal)
        plan = _read_plan(
            flow, offsets_topic=offsets_topic, connector=connector, mm2_source_alias=mm2_source_alias
        )
        problems = plan.problems()
        if problems:
            raise ServiceValidationError.single("offsets_topic", " ".join(problems))
        try:
            positions = apply_takeover(
                plan,
                target=engine.cluster_to_config(flow.target),
                source_alias=flow.source.alias,
                timeout_s=settings.MIRRORPLANE_CLUSTER_TIMEOUT_S,
            )
        except Mm2StillWriting as exc:
            raise ServiceConflict(str(exc)) from exc
        except TakeoverError as exc:
            raise ClusterUnavailable(str(exc)) from exc
        written = {_position_key(*key): offset for key, offset in sorted(positions.items())}
        services.audit_record(
            actor=actor,
            action=AuditAction.IMPORT,
            object_type="flow",
            object_id=flow.pk,
            object_repr=flow.name,
            before={
                _position_key(p.topic, p.partition): p.current_next_offset
                for p in plan.partitions
                if (p.topic, p.partition) in positions
            },
            after=written,
            detail=f"take over from MM2: {len(written)} partition position(s) from {plan.offsets_topic} "
            f"({sum(p.already_on_target for p in plan.partitions)} record(s) MM2 copied past its last commit "
            "not copied again)",
        )
    return TakeoverResult(flow=flow, plan=plan, dry_run=False, applied=True, written=written)


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
