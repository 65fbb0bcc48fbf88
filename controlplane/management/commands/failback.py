"""`python manage.py failback A->B [--groups g1,g2] [--force] [--confirm A->B] [--async] [--json]`."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from controlplane.management.commands.failover import (
    add_operation_arguments,
    flow_by_name,
    run_operation_command,
)
from controlplane.operations.models import OperationKind


class Command(BaseCommand):
    help = (
        "Fail a failed-over flow back: replicate what was written on the target back to the source (the "
        "reverse flow), wait for it, and move the groups' offsets back."
    )

    def add_arguments(self, parser):
        parser.add_argument("flow", help="the failed-over flow, A->B (or its id)")
        parser.add_argument("--groups", help="comma-separated groups (default: those the failover moved)")
        add_operation_arguments(parser)

    def handle(self, *args, **options):
        flow = flow_by_name(options["flow"])
        groups = [g for g in (options["groups"] or "").split(",") if g.strip()] or None
        run_operation_command(self, kind=OperationKind.FAILBACK, flow=flow, groups=groups, options=options)
