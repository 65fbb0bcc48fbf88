"""Loaded by pytest before Django's settings (`-p tests.environment` in pyproject.toml).

The settings refuse the public development SECRET_KEY when DEBUG is false, as in production; the suite
runs with DEBUG false too, so it gets a key of its own here (inherited by the worker processes it starts).

Under pytest-xdist (`-n N`) each worker process is a suite of its own: its own test database (pytest-django
suffixes the name), its own Kafka clusters (session fixtures), and here its own Redis databases, so that
one worker's flushes, queues, leases and presence never meet another's.
"""

from __future__ import annotations

import os
import re
import secrets

os.environ.setdefault("SECRET_KEY", f"tests-{secrets.token_urlsafe(40)}")
# The suite's schema registries, webhook receivers and OpenID provider listen on loopback, which the
# outbound policy refuses unless listed (replication.outbound), and the tests name hosts under .example and
# .example.com (reserved domains); the worker processes inherit it.
os.environ.setdefault(
    "MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED", "127.0.0.0/8,::1,localhost,*.example,*.example.com"
)

# Every JVM the suite starts (Kafka brokers and their format tool, Spark in this process and in the
# workers it starts, the schema registries, MirrorMaker 2) compiles with C1 only: on the 2-core machine
# CPU is what the suite waits for, and a test's JVM lives too short, on too little data, for C2's work
# to pay back (measured: a broker's start and stop 7 -> 4 CPU-seconds; tests/workers/test_reports_runtime.py
# 42-53 -> 27-32 s, tests/dashboards/test_report_pipeline.py 75 -> 43 s). The JIT tier changes no
# behaviour; `make bench` and `make demo` keep the JVM's defaults.
if "TieredStopAtLevel" not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = (
        f"-XX:TieredStopAtLevel=1 {os.environ.get('JAVA_TOOL_OPTIONS', '')}".strip()
    )

# The suite's brokers collect garbage with the serial collector instead of G1 (Kafka's choice, kept by
# `make bench` and `make demo`): a broker of a test holds little, and G1's concurrent threads cost CPU the
# suite waits for (measured, C1 both: 100,000 records of 200 B produced and consumed, broker CPU 0.73-0.86
# -> 0.46-0.48 s; start and idle unchanged). replication.kafka.apache takes it as Kafka's scripts do.
os.environ.setdefault("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:+UseSerialGC")

# The Redis URLs the suite reads, with the defaults of settings.py, tests/workers and tests/e2e.
REDIS_URLS = {
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "MIRRORPLANE_TEST_REDIS_URL": "redis://127.0.0.1:6379/15",
    "MIRRORPLANE_E2E_REDIS_URL": "redis://127.0.0.1:6379/14",
}
REDIS_DATABASES = 16  # redis.conf's default `databases`


def _redis_database(url: str) -> int:
    match = re.search(r"/(\d+)$", url)
    return int(match.group(1)) if match else 0


def redis_urls_of_worker(urls: dict[str, str], worker: int) -> dict[str, str]:
    """The URLs with database numbers of xdist worker `worker` alone: worker 0 keeps them; worker n takes
    the n-th group of numbers none of worker 0's uses (two URLs on one database stay on one)."""
    first = sorted({_redis_database(url) for url in urls.values()})
    if worker == 0:
        return dict(urls)
    free = [number for number in range(REDIS_DATABASES) if number not in first]
    chosen = free[len(first) * (worker - 1) : len(first) * worker]
    if len(chosen) < len(first):
        raise RuntimeError(f"not enough Redis databases for xdist worker {worker}: run fewer workers")
    mapping = dict(zip(first, chosen, strict=True))
    return {
        name: re.sub(r"(/\d+)?$", f"/{mapping[_redis_database(url)]}", url, count=1)
        for name, url in urls.items()
    }


_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw"):
    os.environ.update(
        redis_urls_of_worker(
            {name: os.environ.get(name, url) for name, url in REDIS_URLS.items()}, int(_worker[2:])
        )
    )
