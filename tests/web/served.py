"""The web as the Dockerfile runs it (gunicorn, DEBUG off) on the test database, and clients of it: a
browser-like session signed in through /login/, and an API client with a token."""

from __future__ import annotations

import os

import requests

from tests.workers.harness import Gunicorn, database_url

PASSWORD = "a-long-test-password-0123"
REDIS_URL = os.environ.get("MIRRORPLANE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def web_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": REDIS_URL, "PYTHONUNBUFFERED": "1"}
    env.pop("DEBUG", None)
    return {**env, **extra}


def login(web: Gunicorn, username: str, password: str = PASSWORD, *, path: str = "/login/", **kwargs):
    """One POST of the login form (after the GET that gives its CSRF cookie): the session and the answer."""
    session = requests.Session()
    session.get(f"{web.url}{path}", timeout=10, **kwargs)
    answer = session.post(
        f"{web.url}{path}",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": f"{web.url}{path}", **kwargs.pop("headers", {})},
        timeout=10,
        allow_redirects=False,
        **kwargs,
    )
    return session, answer


def signed_in(web: Gunicorn, username: str) -> requests.Session:
    session, answer = login(web, username)
    assert answer.status_code == 302, answer.text[:500]
    return session


def api(web: Gunicorn, token: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    return session
