from django.core.management.base import BaseCommand, CommandError

from controlplane import core
from controlplane.core import crypto
from controlplane.core.secrets import rotated_text


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret. With --new-key KEY (or --generate), with that key, then set "
        "MIRRORPLANE_SECRETS_KEY=KEY; without, with the first key of MIRRORPLANE_SECRETS_KEY (after "
        "prepending a new key to the list). --generate-only prints a fresh key and changes nothing."
    )

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--new-key", help="a Fernet key (32 url-safe base64 bytes)")
        group.add_argument("--generate", action="store_true", help="generate the new key and print it")
        group.add_argument("--generate-only", action="store_true", help="print a new key; change nothing")

    def handle(self, *args, new_key, generate, generate_only, **options):
        if generate_only:
            self.stdout.write(crypto.generate_key())
            return
        key = crypto.generate_key() if generate else new_key
        try:
            counts = core.secrets_key_rotate(actor=None, new_key=key)
        except crypto.SecretsKeyError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"re-encrypted the secrets of {rotated_text(counts)}")
        if key:
            self.stderr.write(
                "now set MIRRORPLANE_SECRETS_KEY to this key and restart the control plane and workers:"
            )
            self.stdout.write(key)
