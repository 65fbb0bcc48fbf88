"""The benchmarks' client of a running web: an admin's signed-in browser session, API token and metrics
bearer token."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field


@dataclass
class Admin:
    """A signed-in admin's browser session and API token, and the metrics bearer token (per web)."""

    username: str
    password: str
    token: str
    metrics_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    browser: object = None
    api: object = None
    metrics: object = None

    @classmethod
    def create(cls, username: str) -> Admin:
        from controlplane import core
        from controlplane.core.roles import Role

        password = secrets.token_urlsafe(16)
        _, token = core.user_create_with_role(username=username, role=Role.ADMIN, password=password)
        return cls(username=username, password=password, token=token)

    def sign_in(self, url: str) -> None:
        import requests

        from harness.runtime import sign_in

        self.browser = sign_in(url, username=self.username, password=self.password)
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Token {self.token}"
        self.metrics = requests.Session()
        self.metrics.headers["Authorization"] = f"Bearer {self.metrics_token}"
