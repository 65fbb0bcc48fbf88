from django.core.management.base import BaseCommand

from controlplane import selectors


class Command(BaseCommand):
    help = "Print every cluster and flow as mm2.properties (secrets as ${env:...} placeholders)."

    def handle(self, *args, **options):
        self.stdout.write(selectors.mm2_export(), ending="")
