import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from controlplane.core.errors import ServiceValidationError
from controlplane.flows import mm2


class Command(BaseCommand):
    help = (
        "Import the clusters and flows of an mm2.properties file or a Strimzi KafkaMirrorMaker2 resource "
        "(YAML); --dry-run: show the changes only."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument(
            "--force",
            action="store_true",
            help="import clusters that share a bootstrap server with another alias's (one cluster, two aliases)",
        )

    def handle(self, *args, file, dry_run, force, **options):
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from exc
        try:
            result = mm2.mm2_import(actor=None, text=text, dry_run=dry_run, source_name=file, force=force)
        except ServiceValidationError as exc:
            lines = [f"{field}: {message}" for field, messages in exc.errors.items() for message in messages]
            raise CommandError("import refused:\n" + "\n".join(lines)) from exc
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        for change in result.changes:
            self.stdout.write(f"{change.change:<9} {change.object_type} {change.name}")
            for name, values in change.fields.items():
                self.stdout.write(
                    f"    {name}: {json.dumps(values['before'])} -> {json.dumps(values['after'])}"
                )
        for preview in result.previews:
            self._preview(preview)
        self.stdout.write("dry run: nothing changed" if dry_run else "imported")

    def _preview(self, preview) -> None:
        if preview.problem:
            self.stdout.write(f"flow {preview.flow}: {preview.problem}")
            return
        enabled = "" if preview.enabled else " (disabled: nothing until enabled)"
        self.stdout.write(
            f"flow {preview.flow} would mirror {preview.replicated_count} topic(s){enabled}, "
            f"{preview.loop_count} looping (read {preview.read_at.isoformat()}):"
        )
        for topic in preview.replicated:
            loop = f"  LOOP: {topic.loop}" if topic.loop else ""
            self.stdout.write(f"    {topic.topic} -> {topic.remote_topic}{loop}")
