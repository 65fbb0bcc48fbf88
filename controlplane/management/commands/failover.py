"""`python manage.py failover A->B --groups g1,g2 [--dry-run] [--force] [--confirm A->B] [--async] [--json]`.

Runs the failover operation in this process (progress printed), or with --async queues it for the
operations workers (beat hands it over) and prints its id.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from controlplane import operations
from controlplane.core.errors import ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.flows.models import Flow
from controlplane.operations import failover
from controlplane.operations.models import Operation, OperationKind, OperationOutcome


def flow_by_name(name: str) -> Flow:
    """`A->B` or a flow id."""
    source, arrow, target = name.partition("->")
    flows = Flow.objects.select_related("source", "target")
    try:
        if arrow:
            return flows.get(source__alias=source, target__alias=target)
        return flows.get(pk=int(name))
    except (Flow.DoesNotExist, ValueError):
        raise CommandError(f"no flow {name!r} (name it A->B or by its id)") from None


def confirmation(*, flow: Flow, given: str | None) -> str:
    """--confirm, else typed at the terminal; nothing (refused) when not interactive."""
    if given is not None:
        return given
    if not sys.stdin.isatty():
        return ""
    return input(f"Type the flow's name ({flow.name}) to confirm: ").strip()


def write_checklist(command: BaseCommand, plan: dict) -> None:
    for item in plan["checklist"]:
        command.stdout.write(f"  [{item['status'].upper():4}] {item['check']}: {item['explanation']}")


SERVICE_ERRORS = (ServiceValidationError, ServiceConflict, ClusterUnavailable, PermissionDenied)


def add_operation_arguments(parser) -> None:
    parser.add_argument("--force", action="store_true", help="go on despite failed checks or a drain timeout")
    parser.add_argument("--confirm", help="the flow's name (asked at the terminal when omitted)")
    parser.add_argument(
        "--drain-timeout",
        "--timeout",
        dest="drain_timeout",
        type=float,
        default=operations.DEFAULT_DRAIN_TIMEOUT_S,
        help="the longest drain (s); --timeout: its deprecated name, removed in the next release",
    )
    parser.add_argument(
        "--async",
        dest="queue_only",
        action="store_true",
        help="queue it for the operations workers and return",
    )
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")


def run_operation_command(
    command: BaseCommand, *, kind: str, flow: Flow, groups: list[str] | None, options
) -> None:
    """Request the operation; run it here (progress printed) unless --async; print its outcome."""
    try:
        operation = operations.operation_request(
            actor=None,
            kind=kind,
            flow=flow,
            confirm=confirmation(flow=flow, given=options["confirm"]),
            groups=groups,
            force=options["force"],
            drain_timeout_s=options["drain_timeout"],
        )
    except SERVICE_ERRORS as exc:
        raise CommandError(str(exc)) from exc
    if options["queue_only"]:
        command.stdout.write(f"{kind} operation {operation.pk} queued")
        return
    seen: list[str] = []

    def echo(current: Operation) -> None:
        line = f"[{current.progress:4.0%}] {current.phase}: {current.message}"
        if not seen or seen[-1] != line:
            seen.append(line)
            command.stdout.write(line)

    worker = f"command@{socket.gethostname()}:{os.getpid()}"
    finished = operations.run_operation(operation_id=operation.pk, worker=worker, echo=echo)
    if finished is None:
        raise CommandError(f"{kind} operation {operation.pk} is run by a worker: follow it in the UI or API")
    if options["json"]:
        command.stdout.write(json.dumps(operations.operation_summary(finished), indent=2, default=str))
    else:
        for result in finished.group_results.all():
            command.stdout.write(f"  group {result.group}: {result.outcome} {result.written} {result.detail}")
    if finished.outcome != OperationOutcome.SUCCEEDED:
        raise CommandError(f"{kind} operation {finished.pk} {finished.outcome}: {finished.error}")
    command.stdout.write(
        command.style.SUCCESS(f"{kind} operation {finished.pk} succeeded: {finished.message}")
    )


class Command(BaseCommand):
    help = (
        "Fail a flow over to its target: plan (--dry-run) or run the failover for the given consumer groups."
    )

    def add_arguments(self, parser):
        parser.add_argument("flow", help="the flow, A->B (or its id)")
        parser.add_argument("--groups", required=True, help="comma-separated consumer groups to move")
        parser.add_argument("--dry-run", action="store_true", help="show the plan only")
        add_operation_arguments(parser)

    def handle(self, *args, **options):
        flow = flow_by_name(options["flow"])
        groups = [group for group in options["groups"].split(",") if group.strip()]
        if not options["dry_run"]:
            run_operation_command(
                self, kind=OperationKind.FAILOVER, flow=flow, groups=groups, options=options
            )
            return
        try:
            plan = failover.failover_plan(flow=flow, groups=groups).to_dict()
        except SERVICE_ERRORS as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(plan, indent=2, default=str))
            return
        self.stdout.write(f"flow {flow.name}: records at risk {plan['records_at_risk']}")
        write_checklist(self, plan)
        for group in plan["groups"]:
            offsets = ", ".join(
                f"{row['remote_topic']}[{row['partition']}]={row['translated_offset']}"
                for row in group["partitions"]
            )
            self.stdout.write(f"  group {group['group']} ({group['target_state']}): {offsets}")
