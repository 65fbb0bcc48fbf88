"""The web as the Dockerfile runs it (gunicorn, DEBUG off) on the test database, and clients of it: a
browser-like session signed in through /login/, and an API client with a token."""

from __future__ import annotations

import os

import requests

from harness.runtime import Gunicorn, database_url, login_attempt, sign_in

PASSWORD = "a-long-test-password-0123"
REDIS_URL = os.environ.get("MIRRORPLANE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def web_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": REDIS_URL, "PYTHONUNBUFFERED": "1"}
    env.pop("DEBUG", None)
    return {**env, **extra}


def login(web: Gunicorn, username: str, password: str = PASSWORD, *, path: str = "/login/"):
    """One login attempt through the form: (session, answer)."""
    return login_attempt(web.url, username=username, password=password, path=path)


def signed_in(web: Gunicorn, username: str) -> requests.Session:
    return sign_in(web.url, username=username, password=PASSWORD)


def api(web: Gunicorn, token: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    return session
