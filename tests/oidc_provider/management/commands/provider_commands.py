"""The provider's management commands, read from stdin one a line (shell words, as on a command line), each
answered on stdout with one line: `ok`, or `error: ...`. One Django start serves every command a test
module runs (migrate, provider_user, provider_client): a `python -m django` per command took about 3 s
at load, and the SSO tests set a user up in nearly every test."""

import io
import shlex
import sys

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run management commands read from stdin, one a line, answering `ok` or `error: ...` for each."

    def handle(self, *args, **options):
        for line in sys.stdin:
            try:
                call_command(*shlex.split(line), stdout=io.StringIO(), stderr=io.StringIO())
            except Exception as exc:  # answered to the caller, whose test fails on it
                answer = f"error: {type(exc).__name__}: {exc}"
            else:
                answer = "ok"
            self.stdout.write(" ".join(answer.splitlines()))
            self.stdout.flush()
