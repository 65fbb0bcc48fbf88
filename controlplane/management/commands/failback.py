"""`python manage.py failback A->B [--groups g1,g2] [--force] [--confirm A->B] [--json]`."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from controlplane import failover
from controlplane.management.commands.failover import SERVICE_ERRORS, confirmation, flow_by_name


class Command(BaseCommand):
    help = "Fail a failed-over flow back: start the reverse flow and move the groups' offsets back."

    def add_arguments(self, parser):
        parser.add_argument("flow", help="the failed-over flow, A->B (or its id)")
        parser.add_argument("--groups", help="comma-separated groups (default: those the failover moved)")
        parser.add_argument("--force", action="store_true")
        parser.add_argument("--confirm", help="the flow's name (asked at the terminal when omitted)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        flow = flow_by_name(options["flow"])
        groups = [g for g in (options["groups"] or "").split(",") if g.strip()] or None
        try:
            result = failover.failback_execute(
                actor=None,
                flow=flow,
                confirm=confirmation(flow=flow, given=options["confirm"]),
                groups=groups,
                force=options["force"],
            ).to_dict()
        except SERVICE_ERRORS as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2))
            return
        created = "created" if result["reverse_flow_created"] else "enabled"
        self.stdout.write(
            f"reverse flow {result['reverse_flow']} {created}; excluded: {result['topics_exclude']}"
        )
        for group in result["groups"]:
            self.stdout.write(
                f"  group {group['group']}: {group['outcome']} {group['written']} {group['detail']}"
            )
