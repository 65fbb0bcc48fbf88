"""/healthz and /readyz against the real database, Redis and Celery worker and beat processes."""

from __future__ import annotations

import subprocess
import sys

from django.test import Client

from harness.runtime import REPO, wait_until


def _ready(client: Client, require: str = "") -> tuple[int, dict]:
    response = client.get("/readyz" + (f"?require={require}" if require else ""))
    return response.status_code, response.json()


def _check(body: dict, name: str) -> dict:
    return next(check for check in body["checks"] if check["name"] == name)


def test_health_and_readiness_follow_the_runtime(celery_runtime, settings):
    client = Client()
    assert client.get("/healthz").content == b"ok\n"
    code, body = _ready(client)
    assert code == 200 and body["status"] == "ready"  # no worker yet: the web itself is ready
    assert _check(body, "database")["ok"] and _check(body, "redis")["ok"]
    assert "no worker seen consuming replication" in _check(body, "workers:replication")["detail"]
    assert _ready(client, "workers")[0] == 503

    celery_runtime.start_worker("w1", queues="replication,metadata")
    celery_runtime.start_beat()
    wait_until(lambda: _ready(client, "workers,beat")[0] == 200, timeout_s=60, what="worker and beat seen")
    _, body = _ready(client)
    [worker] = body["workers"]
    assert worker["name"].startswith("w1@") and {"replication", "metadata"} <= set(worker["queues"])
    assert worker["age_s"] >= 0 and worker["observed_at"] > 0
    wait_until(  # start-up done: its heap is out of the cycle collector's walks (replication.gc_settings)
        lambda: (
            "objects frozen out of the cycle collector" in (celery_runtime.workdir / "w1.log").read_text()
        ),
        timeout_s=30,
        what="the worker's start-up heap frozen",
    )
    assert set(worker["stats"]) == {"slices", "slice_errors", "leases_held", "slices_per_s"}
    probe = subprocess.run(
        [sys.executable, "-m", "workers.probe", "worker", "--name", worker["name"]],
        cwd=REPO,
        env=celery_runtime.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0 and "healthy" in probe.stdout

    celery_runtime.stop("w1")  # a clean stop withdraws the worker at once
    code, body = _ready(client, "workers")
    assert code == 503 and body["workers"] == []


def test_readiness_names_an_unreachable_redis(db, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    code, body = _ready(Client())
    assert code == 503 and body["status"] == "unready"
    redis_check = _check(body, "redis")
    assert not redis_check["ok"] and redis_check["detail"].startswith("redis unreachable")
