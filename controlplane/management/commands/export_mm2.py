from django.core.management.base import BaseCommand

from controlplane.core.roles import Role
from controlplane.flows import selectors


class Command(BaseCommand):
    help = (
        "Print every cluster and flow as mm2.properties (secrets as ${env:...} placeholders), or with "
        "--format strimzi as Strimzi KafkaMirrorMaker2 resources (secrets as Secret references)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--format", choices=["properties", "strimzi"], default="properties")

    def handle(self, *args, **options):
        if options["format"] == "strimzi":  # the server's administrator: SASL usernames included
            export = selectors.strimzi_export(role=Role.ADMIN)
        else:
            export = selectors.mm2_export()
        self.stdout.write(export, ending="")
