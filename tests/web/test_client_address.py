"""Issue 35 item 3: the client's address behind the documented reverse proxy (TRUSTED_PROXY_COUNT=1) is
the one the proxy saw, for login throttling and the audit log; what a client writes into X-Forwarded-For
itself counts for nothing. Real nginx (Debian's, `make nginx`) in front of gunicorn as the Dockerfile runs
it; the clients connect from two loopback addresses (127.0.0.2 and 127.0.0.3) so nginx tells them apart."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import requests
from requests.adapters import HTTPAdapter

from controlplane import core
from controlplane.core.models import AuditEvent
from controlplane.core.roles import Role
from harness.runtime import Gunicorn, login_attempt, wait_until
from replication.kafka.processes import free_port
from tests.web.served import PASSWORD, web_env

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed: run `make nginx`")

NGINX_CONF = """\
worker_processes 1;
error_log {root}/error.log;
pid {root}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log {root}/access.log;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi;
  scgi_temp_path {root}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass {upstream};
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
    }}
  }}
}}
"""


class _From(HTTPAdapter):
    """Connections from one local address (a client on another machine, as far as nginx can tell)."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def client(address: str) -> requests.Session:
    session = requests.Session()
    session.mount("http://", _From(address))
    return session


@pytest.fixture(scope="module")
def proxied(django_db_setup, django_db_blocker, tmp_path_factory):
    """gunicorn with TRUSTED_PROXY_COUNT=1 behind nginx: nginx's URL."""
    root = tmp_path_factory.mktemp("nginx")
    with django_db_blocker.unblock():
        env = web_env(TRUSTED_PROXY_COUNT="1")
    web = Gunicorn(env=env, log=root / "gunicorn.log").start()
    port = free_port()
    (root / "nginx.conf").write_text(NGINX_CONF.format(root=root, port=port, upstream=web.url))
    nginx = subprocess.Popen(
        [NGINX, "-p", str(root), "-c", str(root / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=(root / "nginx.out").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(f"{url}/login/", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    wait_until(answers, timeout_s=30, what="nginx in front of gunicorn")
    yield url
    nginx.terminate()
    nginx.wait(10)
    web.kill()


def test_behind_nginx_lockout_and_audit_key_on_the_client_not_the_proxy(proxied, transactional_db):
    """Before: five wrong passwords from one client locked out another client's right password (every
    request came from nginx's address). Now each client is counted by the address nginx saw, and a client
    that forges X-Forwarded-For neither escapes its own lockout nor locks out the address it names."""
    _, token = core.user_create_with_role(username="boss", role=Role.ADMIN, password=PASSWORD)
    attacker, victim = client("127.0.0.2"), client("127.0.0.3")
    forged = {"X-Forwarded-For": "127.0.0.3"}  # the attacker claims to be the victim
    answers = [
        login_attempt(proxied, username="boss", password="wrong", session=attacker, headers=forged)[
            1
        ].status_code
        for _ in range(5)
    ]
    assert answers == [200] * 4 + [429]
    # Still locked out under yet another forged address: the header's left part is the client's own text.
    _, again = login_attempt(
        proxied,
        username="boss",
        password=PASSWORD,
        session=client("127.0.0.2"),
        headers={"X-Forwarded-For": "10.9.8.7"},
    )
    assert again.status_code == 429
    # The victim, from its own address, signs in.
    _, signed_in = login_attempt(proxied, username="boss", password=PASSWORD, session=victim)
    assert signed_in.status_code == 302, signed_in.text[:300]

    # The audit log records the address nginx saw for a write the victim makes (a token rotation),
    # not what the header it sent claims.
    rotated = victim.post(
        f"{proxied}/api/v1/tokens/rotate/",
        headers={"Authorization": f"Token {token}", "X-Forwarded-For": "203.0.113.9"},
        timeout=10,
    )
    assert rotated.status_code == 201, rotated.text[:300]
    event = AuditEvent.objects.filter(actor_name="boss").latest("at")
    assert (event.action, event.client_address) == ("rotate_api_token", "127.0.0.3")
