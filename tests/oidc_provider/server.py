"""The test OpenID Connect provider as a process: django-oauth-toolkit under gunicorn on a free loopback port,
on its own SQLite file, signing ID tokens with an RSA key made for this run. Users, their groups and the
console's client are set with the provider's own management commands (provider_user, provider_client), run
by one `provider_commands` process for the provider's life."""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from harness.runtime import GUNICORN, REPO, wait_until
from replication.kafka.processes import free_port


def _rsa_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


class OidcProvider:
    def __init__(self, *, workdir: Path) -> None:
        self.workdir, self.process, self.commands, self.url = workdir, None, None, ""
        self.log = workdir / "provider.log"
        environment = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG"}}
        self.env = {
            **environment,
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
            "OIDC_PROVIDER_DB": str(workdir / "provider.sqlite3"),
            "OIDC_PROVIDER_SECRET_KEY": secrets.token_urlsafe(40),
            "OIDC_PROVIDER_RSA_KEY": _rsa_key_pem(),
            "PYTHONUNBUFFERED": "1",
        }

    @property
    def issuer(self) -> str:
        return f"{self.url}/o"

    def manage(self, *args: str) -> None:
        """One management command, run by the provider's `provider_commands` process."""
        self.commands.stdin.write(shlex.join(args) + "\n")
        self.commands.stdin.flush()
        answer = self.commands.stdout.readline().strip()
        assert answer == "ok", (
            f"the provider's {args[0]}: {answer or 'no answer (see ' + str(self.log) + ')'}"
        )

    def start(self) -> OidcProvider:
        with open(self.log, "ab") as errors:
            self.commands = subprocess.Popen(
                [sys.executable, "-m", "django", "provider_commands"],
                env=self.env,
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        self.manage("migrate", "--no-input")
        self.url = f"http://127.0.0.1:{free_port()}"
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [
                    GUNICORN,
                    "django.core.wsgi:get_wsgi_application()",
                    "--bind",
                    self.url.removeprefix("http://"),
                ],
                env=self.env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(self._answers, timeout_s=60, what="the OIDC provider to answer")
        return self

    def _answers(self) -> bool:
        try:
            return requests.get(f"{self.issuer}/.well-known/openid-configuration", timeout=5).ok
        except requests.RequestException:
            return False

    def client(self, client_id: str, *, secret: str, redirect_uris: list[str]) -> None:
        self.manage(
            "provider_client", client_id, "--secret", secret, "--redirect-uris", " ".join(redirect_uris)
        )

    def user(self, username: str, *, password: str, groups: list[str]) -> None:
        self.manage("provider_user", username, "--password", password, "--groups", ",".join(groups))

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.commands.stdin.close()  # its loop ends at the end of its input
        self.commands.wait(10)
