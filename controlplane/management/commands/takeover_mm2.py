"""Take a flow over from a stopped MM2 from the command line: the same operation (kind `takeover`) the
API and the page queue, requested and then run here in the command (a command is not a web request)."""

import json
import os
import socket

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from controlplane import operations
from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.flows import selectors
from controlplane.operations import takeover
from controlplane.operations.models import OperationOutcome
from replication.takeover import MM2_SOURCE_CONNECTOR


class Command(BaseCommand):
    help = (
        "Take a flow (e.g. A->B) over from a stopped MirrorMaker 2: show per source partition where "
        "replication resumes (dry run, the default); --apply stores those positions (flow paused or disabled)."
    )

    def add_arguments(self, parser):
        parser.add_argument("flow", help="the flow's name, source->target")
        parser.add_argument("--apply", action="store_true", help="store the positions (default: dry run)")
        parser.add_argument(
            "--offsets-topic",
            default="",
            help="MM2's offset.storage.topic (default mm2-offsets.<source>.internal)",
        )
        parser.add_argument(
            "--connector", default=MM2_SOURCE_CONNECTOR, help="the MirrorSourceConnector's name"
        )
        parser.add_argument(
            "--mm2-source-alias", default="", help="the source alias in MM2's file, if different"
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args, flow, apply, offsets_topic, connector, mm2_source_alias, json: bool, **options):
        source, _, target = flow.partition("->")
        stored = selectors.flow_list().filter(source__alias=source, target__alias=target).first()
        if stored is None:
            raise CommandError(f"flow {flow!r} does not exist: give it as source->target, e.g. A->B")
        try:
            operation = takeover.takeover_request(
                actor=None,
                flow=stored,
                dry_run=not apply,
                offsets_topic=offsets_topic,
                connector=connector,
                mm2_source_alias=mm2_source_alias,
            )
        except ServiceValidationError as exc:
            lines = [f"{name}: {text}" for name, texts in exc.errors.items() for text in texts]
            raise CommandError("take-over refused:\n" + "\n".join(lines)) from exc
        except (ServiceConflict, PermissionDenied) as exc:
            raise CommandError(f"take-over refused: {exc}") from exc
        # A command is not a web request: it runs the operation here, as a worker would (progress on stderr).
        worker = f"command@{socket.gethostname()}:{os.getpid()}"
        finished = operations.run_operation(
            operation_id=operation.pk,
            worker=worker,
            echo=lambda current: self.stderr.write(f"[{current.progress:4.0%}] {current.message}"),
        )
        if finished is None:
            raise CommandError(
                f"takeover operation {operation.pk} is run by a worker: follow it in the UI or API"
            )
        if finished.outcome != OperationOutcome.SUCCEEDED:
            raise CommandError(f"take-over {finished.outcome} (operation {finished.pk}): {finished.error}")
        body = {
            **finished.result["plan"],
            "operation": finished.pk,
            "dry_run": finished.dry_run,
            "observed_at": finished.result["observed_at"],
            "written": finished.result.get("written", {}),
        }
        if json:
            self.stdout.write(_json(body))
            return
        self.stdout.write(
            f"MM2 positions for {body['mm2_positions']} partition(s) in {body['offsets_topic']}; "
            f"{body['offset_syncs']} partition(s) with offset syncs in {body['offset_syncs_topic']}; "
            f"{body['checkpoint_groups']} group(s) with checkpoints in {body['checkpoints_topic']} (kept as they are)"
        )
        self.stdout.write(
            f"{'partition':<40} {'resumes at':>10} {'MM2 next':>10} {'on target':>10} {'to copy':>10}"
        )
        for row in body["partitions"]:
            resumes = "earliest" if row["next_offset"] is None else row["next_offset"]
            mm2_next = "-" if row["mm2_next_offset"] is None else row["mm2_next_offset"]
            self.stdout.write(
                f"{row['topic'] + '[' + str(row['partition']) + ']':<40} {resumes:>10} {mm2_next:>10} "
                f"{row['already_on_target']:>10} {row['records_to_copy']:>10}"
            )
        for problem in body["problems"]:
            self.stderr.write(f"problem: {problem}")
        self.stdout.write(
            "dry run: nothing changed"
            if finished.dry_run
            else f"applied: {len(body['written'])} position(s) stored"
        )


def _json(body) -> str:
    return json.dumps(body, indent=2, sort_keys=True)
