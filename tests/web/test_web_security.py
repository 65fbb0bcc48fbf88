"""Issue 27 (security), items 9 and 10, through the real web server: login throttling (django-axes) on
/login/ and /admin/login/, and the HTTPS deployment settings (`manage.py check --deploy` clean with them)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from cryptography.fernet import Fernet

from controlplane import core
from controlplane.core.roles import Role
from harness.runtime import Gunicorn
from tests.web.served import PASSWORD, login, web_env

REPO = Path(__file__).resolve().parents[2]


# -- item 9: login throttling -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_login_throttling_locks_out_wrong_passwords_on_both_login_pages(web, admin, path):
    """40 wrong passwords in 11 s all went through; now the fifth locks the account out from that address,
    and the right password is refused too until the cool-off ends."""
    other, _ = core.user_create_with_role(username="other", role=Role.ADMIN, password=PASSWORD)
    answers = [login(web, "boss", "wrong-password", path=path)[1].status_code for _ in range(5)]
    assert answers == [200] * 4 + [429]  # the form again with its error, then the lockout
    _, locked = login(web, "boss", PASSWORD, path=path)
    assert locked.status_code == 429, locked.text[:300]
    assert "too many" in locked.text.lower() or "locked" in locked.text.lower()
    # Another account from the same address is not locked out by boss's failures.
    assert login(web, other.username, PASSWORD, path=path)[1].status_code == 302


def test_a_right_password_resets_the_count(web, admin):
    for _ in range(3):
        assert login(web, "boss", "wrong-password")[1].status_code == 200
    assert login(web, "boss")[1].status_code == 302
    for _ in range(4):
        assert login(web, "boss", "wrong-password")[1].status_code == 200
    assert login(web, "boss")[1].status_code == 302


# -- item 10: HTTPS deployment settings ---------------------------------------------------------------------
def production_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "MIRRORPLANE_SECRETS_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "MIRRORPLANE_SECRETS_KEY": Fernet.generate_key().decode(),
        "MIRRORPLANE_HTTPS": "true",
        "ALLOWED_HOSTS": "mirrorplane.example.com",
        **extra,
    }


def test_check_deploy_is_clean_with_the_production_settings():
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=production_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "System check identified no issues" in checked.stdout
    plain = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=REPO,
        env=production_env(MIRRORPLANE_HTTPS="false"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "security.W008" in plain.stdout + plain.stderr  # without HTTPS the check says so


@pytest.fixture
def https_web(django_db_setup, django_db_blocker, tmp_path):
    """gunicorn with MIRRORPLANE_HTTPS behind a (simulated) TLS proxy: X-Forwarded-Proto says https."""
    with django_db_blocker.unblock():
        env = web_env(MIRRORPLANE_HTTPS="true")
    server = Gunicorn(env=env, log=tmp_path / "gunicorn.log")
    # The harness waits for /login/ to answer 200: over plain HTTP it now redirects, so wait on /healthz.
    server._answers = lambda: _answers(server.url)
    yield server.start()
    server.kill()


def _answers(url: str) -> bool:
    try:
        return requests.get(f"{url}/healthz", timeout=10).status_code in (200, 503)
    except requests.RequestException:
        return False


def test_https_settings_through_the_proxy_shape(https_web, admin):
    plain = requests.get(f"{https_web.url}/login/", timeout=10, allow_redirects=False)
    assert plain.status_code == 301 and plain.headers["Location"].startswith("https://")
    assert requests.get(f"{https_web.url}/healthz", timeout=10).status_code in (200, 503)  # probes stay plain

    # The proxy speaks HTTPS to the browser and plain HTTP to gunicorn: a client library would keep the
    # Secure cookies from this plain hop, so they are carried by hand here, as the browser would.
    host = https_web.url.removeprefix("http://")
    proxied = {"X-Forwarded-Proto": "https", "Referer": f"https://{host}/login/"}
    form = requests.get(f"{https_web.url}/login/", headers=proxied, timeout=10)
    csrf = form.cookies["csrftoken"]
    answer = requests.post(
        f"{https_web.url}/login/",
        data={"username": "boss", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
        headers={**proxied, "Cookie": f"csrftoken={csrf}"},
        timeout=10,
        allow_redirects=False,
    )
    assert answer.status_code == 302, answer.text[:300]
    set_cookies = answer.raw.headers.getlist("Set-Cookie")
    session_cookie = next(c for c in set_cookies if c.startswith("sessionid="))
    assert "Secure" in session_cookie and "HttpOnly" in session_cookie and "Max-Age=28800" in session_cookie
    assert "Secure" in form.raw.headers["Set-Cookie"]  # the CSRF cookie
    session_id = session_cookie.split(";")[0].split("=", 1)[1]
    page = requests.get(
        f"{https_web.url}/", headers={**proxied, "Cookie": f"sessionid={session_id}"}, timeout=10
    )
    assert page.status_code == 200
    assert page.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    csp = page.headers["Content-Security-Policy"]
    assert (
        "script-src 'self'" in csp
        and "frame-ancestors 'none'" in csp
        and "unsafe-inline" not in csp.split("style-src")[0]
    )
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "onchange=" not in page.text and "<script>" not in page.text  # nothing inline for the CSP to block
