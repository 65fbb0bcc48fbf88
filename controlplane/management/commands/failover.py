"""`python manage.py failover A->B --groups g1,g2 [--dry-run] [--force] [--confirm A->B] [--json]`."""

from __future__ import annotations

import json
import sys

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from controlplane import failover
from controlplane.errors import ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.models import Flow


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


class Command(BaseCommand):
    help = "Fail a flow over to its target: plan (--dry-run) or execute for the given consumer groups."

    def add_arguments(self, parser):
        parser.add_argument("flow", help="the flow, A->B (or its id)")
        parser.add_argument("--groups", required=True, help="comma-separated consumer groups to move")
        parser.add_argument("--dry-run", action="store_true", help="show the plan only")
        parser.add_argument("--force", action="store_true", help="go on despite failed checks")
        parser.add_argument("--confirm", help="the flow's name (asked at the terminal when omitted)")
        parser.add_argument("--timeout", type=float, default=failover.DEFAULT_DRAIN_TIMEOUT_S)
        parser.add_argument("--json", action="store_true", help="print the whole plan/result as JSON")

    def handle(self, *args, **options):
        flow = flow_by_name(options["flow"])
        groups = [group for group in options["groups"].split(",") if group.strip()]
        try:
            if options["dry_run"]:
                output = failover.failover_plan(flow=flow, groups=groups).to_dict()
            else:
                output = failover.failover_execute(
                    actor=None,
                    flow=flow,
                    groups=groups,
                    confirm=confirmation(flow=flow, given=options["confirm"]),
                    force=options["force"],
                    timeout_s=options["timeout"],
                ).to_dict()
        except ServiceValidationError as exc:
            for detail in exc.details:
                self.stderr.write(
                    f"  [{detail['status'].upper():4}] {detail['check']}: {detail['explanation']}"
                )
            raise CommandError(str(exc)) from exc
        except SERVICE_ERRORS as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(output, indent=2, default=str))
            return
        plan = output if options["dry_run"] else output["plan"]
        self.stdout.write(f"flow {flow.name}: records at risk {plan['records_at_risk']}")
        write_checklist(self, plan)
        for group in plan["groups"] if options["dry_run"] else output["groups"]:
            if options["dry_run"]:
                offsets = ", ".join(
                    f"{row['remote_topic']}[{row['partition']}]={row['translated_offset']}"
                    for row in group["partitions"]
                )
                self.stdout.write(f"  group {group['group']} ({group['target_state']}): {offsets}")
            else:
                self.stdout.write(
                    f"  group {group['group']}: {group['outcome']} {group['written']} {group['detail']}"
                )
        if not options["dry_run"]:
            self.stdout.write(self.style.SUCCESS(f"flow {flow.name} is {output['state']}"))
