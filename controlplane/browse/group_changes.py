"""The writes of the consumer group pages: an inactive group's offset reset and its deletion.

Semantics of kafka-consumer-groups.sh: reset `--to-earliest`, `--to-latest`, `--to-datetime`,
`--shift-by`, `--to-offset` (and `translated`, a flow's exact translation of the group's source offsets),
every offset kept within [log start, end]; `--delete`. Both are services: operator role (a refusal is
audited, a dry run's too), refused while the group has members (409 naming their count and the fix), a
dry run that reads and plans only, and every applied change audited with the offsets before it.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.core.exceptions import PermissionDenied
from django.utils import timezone

from controlplane import core
from controlplane.browse.groups import GroupPartition, _flows_checkpointing, _group_plan
from controlplane.browse.seek import parse_moment, topic_name_error
from controlplane.core.bounds import INT64_MAX, INT64_MIN, whole_number
from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditAction, AuditOutcome
from controlplane.core.roles import Role, role_of
from controlplane.flows.cluster_reads import cluster_read
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster, Flow
from replication.checkpoint import ABSENT
from replication.cluster_ports import GroupNotEmpty, TopicReads, UnknownTopic
from replication.config import ClusterConfig
from replication.consumer_groups import (
    GroupDescription,
    OffsetReset,
    ResetStrategy,
    lag,
    offsets_to_write,
    plan_reset,
)
from replication.topic_partition import partition_label

TopicPartition = tuple[str, int]
PARTITION_MAX = 2**31 - 1  # Kafka partition numbers are int32
GONE_STATES = frozenset({ABSENT, "DEAD"})  # how a cluster describes a group it does not know (or deleted)
STRATEGY_HELP = "use earliest, latest, timestamp, shift, offset or translated"


@dataclass(frozen=True)
class _GroupWrite:
    """Who changes which group, and how a refusal of it is recorded."""

    actor: object
    cluster: Cluster
    group: str
    action: str  # AuditAction
    what: str  # "offset reset (shift)", "deletion"

    def audit(self, *, outcome: str, detail: str, before=None, after=None) -> None:
        core.audit_record(
            actor=self.actor,
            action=self.action,
            object_type="consumer_group",
            object_id=f"{self.cluster.alias}/{self.group}"[:100],
            object_repr=f"group {self.group} on {self.cluster.alias}",
            before=before,
            after=after,
            outcome=outcome,
            detail=detail,
        )

    def require_operator(self) -> None:
        """Operators and admins only; a refusal is audited, a dry run's too (it names who tried)."""
        role = role_of(self.actor)
        if role is None or role < Role.OPERATOR:
            held = "no role" if role is None else f"the {role.group_name} role"
            exc = PermissionDenied(f"a consumer group's {self.what} needs the operator role; you have {held}")
            self.audit(outcome=AuditOutcome.REFUSED, detail=f"{self.what}: {exc}")
            raise exc

    def refuse_if_active(self, description: GroupDescription, *, doing: str) -> None:
        if description.active:
            members = len(description.members)
            raise ServiceConflict(
                f"group {self.group} is {description.state} on {self.cluster.alias} with {members} "
                f"member{'' if members == 1 else 's'}: {doing} while consumers run; stop them (the group "
                "becomes EMPTY) and try again"
            )


# -- offset reset -----------------------------------------------------------------------------------------
@dataclass
class ResetResult:
    cluster: Cluster
    group: str
    strategy: ResetStrategy
    dry_run: bool
    rows: list[OffsetReset]
    applied: bool = False
    refused: dict[str, str] = field(default_factory=dict)  # "topic[partition]" -> the broker's reason
    read_at: datetime.datetime = field(default_factory=timezone.now)

    @property
    def changes(self) -> int:
        return sum(1 for row in self.rows if row.changes)

    @property
    def lag_change(self) -> int | None:
        known = [row.lag_change for row in self.rows if row.lag_change is not None]
        return sum(known) if known else None

    def to_dict(self) -> dict:
        return {
            "cluster": self.cluster.alias,
            "group": self.group,
            "strategy": self.strategy.value,
            "dry_run": self.dry_run,
            "applied": self.applied,
            "partitions": [row.to_dict() for row in self.rows],
            "changes": self.changes,
            "lag_change": self.lag_change,
            "refused": self.refused,
            "read_at": self.read_at.isoformat(),
        }


@dataclass(frozen=True)
class ResetRequest:
    strategy: ResetStrategy
    timestamp_ms: int | None = None
    flow: Flow | None = None
    topic: str = ""
    partitions: frozenset[int] = frozenset()  # of `topic`; empty: all
    shift_by: int = 0
    to_offset: int | None = None


def _parse_partitions(raw, errors: dict[str, list[str]]) -> frozenset[int]:
    items = raw.split(",") if isinstance(raw, str) else list(raw or ())
    fix = "give partition numbers separated by commas, e.g. 0,2"
    chosen = set()
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        try:
            chosen.add(whole_number(item, field="partitions", maximum=PARTITION_MAX, fix=fix))
        except ServiceValidationError as exc:
            errors.setdefault("partitions", []).extend(exc.errors["partitions"])
            break
    return frozenset(chosen)


def _parse_reset(
    *,
    cluster: Cluster,
    group: str,
    strategy: str,
    timestamp: str,
    flow_id,
    topic: str,
    partitions: str | Sequence[int],
    shift,
    offset,
) -> ResetRequest:
    errors: dict[str, list[str]] = {}
    try:
        chosen = ResetStrategy(strategy)
    except ValueError:
        errors["strategy"] = [f"'{strategy}' is not a reset strategy: {STRATEGY_HELP}"]
        chosen = None
    timestamp_ms = None
    if chosen is ResetStrategy.TIMESTAMP:
        if not str(timestamp or "").strip():
            errors["timestamp"] = ["give the moment to reset to: ISO 8601 (2026-11-24T05:30:00Z) or epoch ms"]
        else:
            try:
                timestamp_ms = parse_moment(str(timestamp))
            except ValueError:
                errors["timestamp"] = [
                    f"'{timestamp}' is not a time: give ISO 8601 (2026-11-24T05:30:00, with or without a zone) "
                    "or epoch milliseconds"
                ]
    shift_by, to_offset = 0, None
    try:
        if chosen is ResetStrategy.SHIFT:
            if shift is None or not str(shift).strip():
                raise ServiceValidationError.single(
                    "shift",
                    "give the records to move by: negative to read again (-100), positive to skip (50)",
                )
            shift_by = whole_number(
                shift, field="shift", minimum=INT64_MIN, maximum=INT64_MAX, fix="e.g. -100 (back) or 50 (on)"
            )
        if chosen is ResetStrategy.OFFSET:
            if offset is None or not str(offset).strip():
                raise ServiceValidationError.single("offset", "give the offset to reset to, e.g. 1200")
            to_offset = whole_number(offset, field="offset", fix="give an offset from 0, e.g. 1200")
    except ServiceValidationError as exc:
        errors.update(exc.errors)
    flow = None
    if chosen is ResetStrategy.TRANSLATED:
        candidates = _flows_checkpointing(group, target=cluster)
        flow = next((f for f in candidates if str(f.pk) == str(flow_id)), None)
        if flow is None:
            names = ", ".join(f"{f.pk} ({f.name})" for f in candidates) or "none checkpoints this group"
            errors["flow"] = [
                f"give the flow into {cluster.alias} whose translation to use; flows into {cluster.alias} that "
                f"checkpoint {group}: {names}"
            ]
    topic = str(topic or "").strip()
    if topic and (message := topic_name_error(topic)):
        errors["topic"] = [message]
    chosen_partitions = _parse_partitions(partitions, errors)
    if chosen_partitions and not topic:
        errors.setdefault("partitions", []).append("name the topic these partitions are of")
    if errors or chosen is None:  # no strategy is an error above
        raise ServiceValidationError(errors)
    return ResetRequest(chosen, timestamp_ms, flow, topic, chosen_partitions, shift_by, to_offset)


def _topic_partitions(browser: TopicReads, request: ResetRequest) -> set[TopicPartition]:
    """The partitions of the request's topic it names (all when it names none); 400 for one not there."""
    try:
        count = browser.partition_count(request.topic)
    except UnknownTopic as exc:
        raise ServiceValidationError.single("topic", f"{exc}: check the name on the topics page") from exc
    missing = sorted(p for p in request.partitions if p >= count)
    if missing:
        raise ServiceValidationError.single(
            "partitions",
            f"{request.topic} has {count} partition{'' if count == 1 else 's'} (0-{count - 1}): "
            f"{', '.join(map(str, missing))} {'does' if len(missing) == 1 else 'do'} not exist",
        )
    return {(request.topic, p) for p in (request.partitions or range(count))}


def _plan(config: ClusterConfig, timeout_s: float, *, group: str, request: ResetRequest, committed):
    browser = clusters().topic_reads(config, timeout_s=timeout_s)
    translated: dict[TopicPartition, int | None] | None = None
    if request.strategy is ResetStrategy.TRANSLATED:
        if request.flow is None:  # the request's parsing names the flow a translated reset needs
            raise ServiceValidationError.single("flow", "give the flow whose translation to use")
        plan = _group_plan(request.flow, group, timeout_s).plan
        translated = {(row.remote_topic, row.partition): row.translated_offset for row in plan.partitions}
        partitions = set(translated)
        if request.topic:
            partitions &= _topic_partitions(browser, request)
    elif request.topic:
        partitions = _topic_partitions(browser, request)
    else:
        partitions = set(committed)
    by_time = None
    if request.strategy is ResetStrategy.TIMESTAMP:
        if request.timestamp_ms is None:  # the request's parsing asks for the moment
            raise ServiceValidationError.single("timestamp", "give the moment to reset to")
        by_time = browser.offsets_at(partitions, request.timestamp_ms)
    return plan_reset(
        strategy=request.strategy,
        partitions=partitions,
        current=committed,
        earliest=browser.earliest_offsets(partitions),
        end=browser.end_offsets(partitions),
        by_time=by_time,
        translated=translated,
        shift_by=request.shift_by,
        to_offset=request.to_offset,
    )


def group_offsets_reset(
    *,
    actor,
    cluster: Cluster,
    group: str,
    strategy: str,
    timestamp: str = "",
    flow_id=None,
    topic: str = "",
    partitions: str | Sequence[int] = "",
    shift=None,
    offset=None,
    dry_run: bool = True,
) -> ResetResult:
    """Reset `group`'s committed offsets on `cluster` (all its committed partitions, or `partitions` of
    `topic`, all of them when none is named): to the log start, the end, a moment, by `shift` records, to
    `offset`, or to a flow's exact translation of the group's source offsets. A dry run reads and plans
    only. Operators only; refused while the group is active; refusals and applied resets are audited."""
    write = _GroupWrite(actor, cluster, group, AuditAction.UPDATE, f"offset reset ({strategy})")
    write.require_operator()
    try:
        request = _parse_reset(
            cluster=cluster,
            group=group,
            strategy=strategy,
            timestamp=timestamp,
            flow_id=flow_id,
            topic=topic,
            partitions=partitions,
            shift=shift,
            offset=offset,
        )

        def read(config: ClusterConfig, timeout_s: float):
            admin = clusters().group_admin(config, timeout_s=timeout_s)
            write.refuse_if_active(admin.describe([group])[group], doing="its offsets cannot be reset")
            committed = {key: c.offset for key, c in admin.committed_offsets(group).items()}
            if not committed and not request.topic and request.strategy is not ResetStrategy.TRANSLATED:
                raise ServiceValidationError.single(
                    "topic",
                    f"group {group} has no committed offsets on {cluster.alias}: name the topic to reset",
                )
            return (
                admin,
                committed,
                _plan(config, timeout_s, group=group, request=request, committed=committed),
            )

        admin, committed, rows = cluster_read(cluster, read)
    except (ServiceValidationError, ServiceConflict) as exc:
        if not dry_run:
            write.audit(outcome=AuditOutcome.REFUSED, detail=f"{write.what}: {exc}")
        raise
    result = ResetResult(cluster, group, request.strategy, dry_run, rows)
    if dry_run:
        return result
    offsets = offsets_to_write(rows)
    refused = admin.alter_offsets(group, offsets) if offsets else {}
    result.applied = True
    result.refused = {partition_label(*key): reason for key, reason in refused.items()}
    written = {partition_label(*key): offset for key, offset in offsets.items() if key not in refused}
    how = {
        ResetStrategy.SHIFT: f" by {request.shift_by:+d}",
        ResetStrategy.OFFSET: f" {request.to_offset}",
        ResetStrategy.TRANSLATED: f" via flow {request.flow.name}" if request.flow else "",
    }.get(request.strategy, "")
    write.audit(
        before={partition_label(*key): committed.get(key) for key in offsets},
        after=written,
        outcome=AuditOutcome.FAILURE if refused else AuditOutcome.SUCCESS,
        detail=f"offset reset to {request.strategy.value}{how}: {len(written)} partition(s) written"
        + (f", {len(refused)} refused by the broker" if refused else ""),
    )
    return result


# -- deletion ---------------------------------------------------------------------------------------------
@dataclass
class DeleteResult:
    cluster: Cluster
    group: str
    state: str
    dry_run: bool
    partitions: list[GroupPartition]  # the committed offsets a deletion removes
    deleted: bool = False
    read_at: datetime.datetime = field(default_factory=timezone.now)

    def to_dict(self) -> dict:
        return {
            "cluster": self.cluster.alias,
            "group": self.group,
            "state": self.state,
            "dry_run": self.dry_run,
            "deleted": self.deleted,
            "partitions": [vars(p) for p in self.partitions],
            "read_at": self.read_at.isoformat(),
        }


def group_delete(*, actor, cluster: Cluster, group: str, dry_run: bool = True) -> DeleteResult:
    """Delete `group` on `cluster` with its committed offsets (kafka-consumer-groups --delete). A dry run
    shows what goes. Operators only; refused while the group has members; audited, the offsets before."""
    write = _GroupWrite(actor, cluster, group, AuditAction.DELETE, "deletion")
    write.require_operator()

    def read(config: ClusterConfig, timeout_s: float):
        admin = clusters().group_admin(config, timeout_s=timeout_s)
        description = admin.describe([group])[group]
        write.refuse_if_active(description, doing="it cannot be deleted")
        committed = {key: c.offset for key, c in admin.committed_offsets(group).items()}
        if description.state in GONE_STATES and not committed:
            raise ServiceValidationError.single(
                "group", f"there is no group {group} on {cluster.alias}: check the name on the groups page"
            )
        ends = clusters().topic_reads(config, timeout_s=timeout_s).end_offsets(committed) if committed else {}
        rows = [
            GroupPartition(
                topic,
                partition,
                offset,
                ends.get((topic, partition)),
                lag(offset, ends.get((topic, partition))),
            )
            for (topic, partition), offset in sorted(committed.items())
        ]
        result = DeleteResult(cluster, group, description.state, dry_run, rows)
        if not dry_run:
            try:
                admin.delete_group(group)
            except GroupNotEmpty as exc:  # a consumer joined since it was described
                raise ServiceConflict(
                    f"group {group} on {cluster.alias} has members now ({exc}): it cannot be deleted while "
                    "consumers run; stop them (the group becomes EMPTY) and try again"
                ) from exc
            result.deleted = True
        return result, committed

    try:
        result, committed = cluster_read(cluster, read)
    except (ServiceValidationError, ServiceConflict) as exc:
        if not dry_run:
            write.audit(outcome=AuditOutcome.REFUSED, detail=f"deletion: {exc}")
        raise
    if result.deleted:
        write.audit(
            outcome=AuditOutcome.SUCCESS,
            before={partition_label(*key): offset for key, offset in sorted(committed.items())},
            detail=f"group deleted ({result.state}, {len(committed)} committed partition(s))",
        )
    return result
