"""The API and pages under concurrency: `python -m bench api [--flows 500] [--partitions 10] [--clients 8]
[--rounds 25]`.

Stores `--flows` flows with `--partitions` status rows each (`bench.fleet.seed_fleet`, the metrics bench's
fleet) in a throw-away database next to DATABASE_URL's, starts gunicorn as the Dockerfile runs it (its CMD's
flags: 3 workers x 8 threads) on it, and signs an admin in (a browser session and an API token). Each of
`--clients` clients (a thread with its own keep-alive connections) then asks, `--rounds` times, every
endpoint below once, in an order of its own; a different flow each time for the per-flow ones:

    flows API      /api/v1/flows/                 (token)
    flows page     /flows/                        (browser session)
    flow page      /flows/<id>/                   (browser session)
    flow status    /api/v1/flows/<id>/status/     (token)
    metrics        /metrics                       (bearer token)

Before that, as the baseline in the same run, one client asks the same `--rounds` rounds alone (its p50:
what a request costs without waiting for others). Prints p50 / p95 / p99 per endpoint at concurrency and
the lone client's p50, with the load average before and after. The issue's target: every p99 under 100 ms
at 8 clients and 500 flows (exit 1 when one is missed, or when an answer is not a 200).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from pathlib import Path

from bench.fleet import seed_fleet
from bench.latency import percentile
from bench.runtime import scratch_database
from bench.web import Admin

TARGET_P99_MS = 100.0
ENDPOINTS = ("flows API", "flows page", "flow page", "flow status", "metrics")


def _paths(flow: int) -> dict[str, str]:
    return {
        "flows API": "/api/v1/flows/",
        "flows page": "/flows/",
        "flow page": f"/flows/{flow}/",
        "flow status": f"/api/v1/flows/{flow}/status/",
        "metrics": "/metrics",
    }


class Client(threading.Thread):
    """One client: its own sessions (keep-alive connections) with the admin's credentials."""

    def __init__(self, *, admin: Admin, url: str, flow_ids: list[int], rounds: int, seed: int, start) -> None:
        import requests

        super().__init__(daemon=True)
        self.url, self.flow_ids, self.rounds, self.start_gate = url, flow_ids, rounds, start
        self.random = random.Random(seed)
        self.sessions = {}
        for name, source in (("browser", admin.browser), ("api", admin.api), ("metrics", admin.metrics)):
            session = requests.Session()
            session.headers.update(source.headers)
            session.cookies.update(source.cookies)
            self.sessions[name] = session
        self.timings: dict[str, list[float]] = {name: [] for name in ENDPOINTS}
        self.failures: list[str] = []

    def _session(self, endpoint: str):
        if endpoint == "metrics":
            return self.sessions["metrics"]
        return self.sessions["api" if "API" in endpoint or endpoint == "flow status" else "browser"]

    def run(self) -> None:
        self.start_gate.wait()
        for _ in range(self.rounds):
            paths = _paths(self.random.choice(self.flow_ids))
            order = list(ENDPOINTS)
            self.random.shuffle(order)
            for endpoint in order:
                started = time.perf_counter()
                answer = self._session(endpoint).get(self.url + paths[endpoint], timeout=60)
                answer.content  # noqa: B018 (the whole body read: what a client waits for)
                self.timings[endpoint].append((time.perf_counter() - started) * 1000)
                if answer.status_code != 200:
                    self.failures.append(f"{paths[endpoint]}: {answer.status_code}")


def drive(*, admin: Admin, url: str, flow_ids: list[int], clients: int, rounds: int) -> tuple[dict, list]:
    """`clients` clients asking every endpoint `rounds` times each at once: the sorted timings (ms) per
    endpoint and the failures."""
    gate = threading.Barrier(clients)
    threads = [
        Client(admin=admin, url=url, flow_ids=flow_ids, rounds=rounds, seed=index, start=gate)
        for index in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    timings = {name: sorted(t for thread in threads for t in thread.timings[name]) for name in ENDPOINTS}
    return timings, [failure for thread in threads for failure in thread.failures]


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench api")
    parser.add_argument("--flows", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=25, help="requests per endpoint per client")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="bench-api-"))
    with scratch_database():
        from harness.runtime import Gunicorn, database_url, dockerfile_gunicorn_flags

        flow_ids = [flow.pk for flow in seed_fleet(flows=args.flows, partitions=args.partitions)]
        admin = Admin.create("api-bench")
        env = {**os.environ, "DATABASE_URL": database_url(), "PYTHONUNBUFFERED": "1"}
        env.pop("DEBUG", None)
        env["METRICS_BEARER_TOKEN"] = admin.metrics_token
        web = Gunicorn(env=env, log=workdir / "web.log", args=dockerfile_gunicorn_flags()).start()
        try:
            admin.sign_in(web.url)
            # Warm-up: every worker process imports its views and fills its caches before anything counts.
            drive(admin=admin, url=web.url, flow_ids=flow_ids, clients=args.clients, rounds=2)
            load_before = _load()
            alone, failures = drive(
                admin=admin, url=web.url, flow_ids=flow_ids, clients=1, rounds=args.rounds
            )
            together, more_failures = drive(
                admin=admin, url=web.url, flow_ids=flow_ids, clients=args.clients, rounds=args.rounds
            )
            load_after = _load()
        finally:
            web.kill()
    failures += more_failures

    flags = " ".join(dockerfile_gunicorn_flags())
    print(
        f"API and pages, {args.flows} flows x {args.partitions} partitions, gunicorn {flags}; "
        f"{args.clients} clients x {args.rounds} rounds (log: {workdir / 'web.log'})"
    )
    print(f"  load average before {load_before}, after {load_after} ({os.cpu_count()} CPUs)")
    print(f"  {'endpoint':<12} {'alone p50':>10} {'p50':>8} {'p95':>8} {'p99':>8}   (ms)")
    missed = []
    for name in ENDPOINTS:
        values = together[name]
        p99 = percentile(values, 0.99)
        print(
            f"  {name:<12} {percentile(alone[name], 0.5):>10.1f} {percentile(values, 0.5):>8.1f} "
            f"{percentile(values, 0.95):>8.1f} {p99:>8.1f}"
        )
        if p99 >= TARGET_P99_MS:
            missed.append(name)
    for failure in sorted(set(failures)):
        print(f"  not a 200: {failure}")
    verdict = "met" if not missed and not failures else f"MISSED ({', '.join(missed) or 'failures'})"
    print(f"  target every p99 under {TARGET_P99_MS:g} ms at {args.clients} clients: {verdict}")
    return 0 if not missed and not failures else 1
