"""Security hardening: no start on the public development key, secrets never in a repr, plan rate limit."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from controlplane.core import ratelimit
from controlplane.core.errors import RateLimited
from controlplane.flows import services
from controlplane.status import runtime
from replication.config import ClusterConfig

REPO = Path(__file__).resolve().parents[3]
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="S3cr3t-pw";'


def _start_django(**env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "MIRRORPLANE_SECRETS_KEY"}
    }
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('started')"],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "controlplane.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_refuses_the_development_secret_key():
    refused = _start_django(DEBUG="false")
    assert refused.returncode != 0 and "started" not in refused.stdout
    assert "SECRET_KEY is not set" in refused.stderr and "secrets.token_urlsafe" in refused.stderr
    assert _start_django(DEBUG="true").stdout.strip() == "started"
    assert _start_django(DEBUG="false", SECRET_KEY="a-real-key-" + "x" * 40).stdout.strip() == "started"


def test_cluster_config_never_shows_a_secret():
    config = ClusterConfig(
        alias="B",
        bootstrap_servers="b:9092",
        client={"sasl.jaas.config": JAAS, "ssl.key.password": "k3y-pw", "security.protocol": "SASL_SSL"},
        producer={"sasl.password": "p-pw"},
    )
    shown = f"{config!r} {config} {[config]} { ({'c': config}) }"
    for secret in ("S3cr3t-pw", "k3y-pw", "p-pw", "ScramLoginModule"):
        assert secret not in shown
    assert "SASL_SSL" in shown and "******" in shown
    try:
        raise RuntimeError(f"cannot connect with {config}")
    except RuntimeError as exc:
        assert "S3cr3t-pw" not in str(exc)


@pytest.mark.django_db
def test_a_changed_password_still_changes_the_config_version(two_clusters):
    a, b = two_clusters
    flow = services.flow_create(actor=None, source=a, target=b, enabled=True)
    before = runtime.runtime_flow_spec(flow_id=flow.pk)
    services.cluster_update(actor=None, cluster=b, secret_changes={"client": {"sasl.password": "new-pw"}})
    after = runtime.runtime_flow_spec(flow_id=flow.pk)
    assert before.config_version != after.config_version
    assert "new-pw" not in repr(after)


@pytest.mark.django_db
def test_failover_plan_is_rate_limited_per_user(client_as, two_clusters, settings):
    a, b = two_clusters
    flow = services.flow_create(actor=None, source=a, target=b, enabled=True)
    settings.FAILOVER_PLAN_RATE_PER_MINUTE = 2
    viewer, operator = client_as("viewer"), client_as("operator")
    codes = [viewer.get(f"/api/v1/flows/{flow.pk}/failover/plan/").status_code for _ in range(3)]
    assert codes[:2] != [429, 429] and codes[2] == 429
    limited = viewer.get(f"/api/v1/flows/{flow.pk}/failover/plan/")
    assert limited.status_code == 429 and int(limited["Retry-After"]) >= 1
    assert "at most 2 failover plan request(s) per 60 s" in limited.json()["detail"]
    assert operator.get(f"/api/v1/flows/{flow.pk}/failover/plan/").status_code != 429  # per user


def test_rate_limit_windows_slide_and_are_per_scope():
    user = secrets.randbelow(10**9)  # counts live in the shared Redis: a user no other run has
    ratelimit.hit(scope="test_scope", user_id=user, limit=1, window_s=60, now=6_059.0)
    with pytest.raises(RateLimited):
        ratelimit.hit(scope="test_scope", user_id=user, limit=1, window_s=60, now=6_059.5)
    # a fixed window would let the next one through at 6_060: the last 60 s still hold one
    with pytest.raises(RateLimited) as refused:
        ratelimit.hit(scope="test_scope", user_id=user, limit=1, window_s=60, now=6_061.0)
    assert refused.value.retry_after_s == 59  # when the previous window's weight has fallen away
    ratelimit.hit(scope="test_scope", user_id=user, limit=1, window_s=60, now=6_120.0)
    ratelimit.hit(scope="other_scope", user_id=user, limit=1, window_s=60, now=6_061.0)
    ratelimit.hit(scope="test_scope", user_id=None, limit=1, window_s=60, now=6_061.0)  # the system


def test_refused_requests_do_not_count():
    user = secrets.randbelow(10**9)
    for moment in (9_000.0, 9_010.0):
        ratelimit.hit(scope="test_scope", user_id=user, limit=2, window_s=60, now=moment)
    for _ in range(5):  # a refresh key held down
        with pytest.raises(RateLimited):
            ratelimit.hit(scope="test_scope", user_id=user, limit=2, window_s=60, now=9_020.0)
    # window 150 holds 2 accepted; at 9_090 it weighs 2 * 0.5 = 1, so one more fits
    ratelimit.hit(scope="test_scope", user_id=user, limit=2, window_s=60, now=9_090.0)
