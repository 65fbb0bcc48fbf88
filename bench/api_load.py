"""The API and pages under concurrency: `python -m bench api [--flows 500] [--partitions 10] [--clients 8]
[--rounds 50] [--scrape-interval 5] [--metrics-in-mix] [--one-flow] [--metrics-render both]`.

Stores `--flows` flows with `--partitions` status rows each (`bench.fleet.seed_fleet`, the metrics bench's
fleet) in a throw-away database next to DATABASE_URL's, starts gunicorn as the Dockerfile runs it (its CMD's
flags: 3 workers x 8 threads) on it, and signs an admin in (a browser session and an API token). Each of
`--clients` clients (a thread with its own keep-alive connections) then asks, `--rounds` times, every
endpoint below once, in an order of its own; a different flow each time for the per-flow ones:

    flows API      /api/v1/flows/                 (token)
    flows page     /flows/                        (browser session)
    flow page      /flows/<id>/                   (browser session)
    flow status    /api/v1/flows/<id>/status/     (token)

Meanwhile /metrics (bearer token) is scraped as Prometheus does, once every `--scrape-interval` seconds: a
500-flow exposition is megabytes (every partition's series) that no client asks for 8 times at once; its
target is the metrics bench's (under 1 s). `--metrics-in-mix` makes it a fifth endpoint of every client
instead, held to the same 100 ms as the others. `--one-flow`: every client asks for the same flow (an on-call
team watching one): its status API is shared for a moment (controlplane/core/microcache.py), its page is not
(the page's live refresh, every 5 s, is).

Before that, as the baseline in the same run, one client asks the same rounds alone (and three lone
scrapes): its p50 is what a request costs without waiting for others. Prints p50 / p95 / p99 per endpoint
at concurrency beside the lone p50, with the load average before and after. The issue's target: every
endpoint's p99 under 100 ms at 8 clients and 500 flows, the scrape under 1 s (exit 1 when one is missed,
or when an answer is not a 200). `--metrics-render both` (the default) runs it all twice, /metrics read
by each scrape and then rendered ahead by a metadata worker as shipped (docs/metrics.md), and judges the
second.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from pathlib import Path

import requests

from bench.fleet import seed_fleet
from bench.latency import percentile
from bench.metrics_scrape import TARGET_S as SCRAPE_TARGET_S
from bench.processes import child_pids, process_cpu_s
from bench.runtime import scratch_database
from bench.web import Admin

TARGET_P99_MS = 100.0
ENDPOINTS = ("flows API", "flows page", "flow page", "flow status")
METRICS = "metrics"
LONE_SCRAPES = 3


def _paths(flow: int) -> dict[str, str]:
    return {
        "flows API": "/api/v1/flows/",
        "flows page": "/flows/",
        "flow page": f"/flows/{flow}/",
        "flow status": f"/api/v1/flows/{flow}/status/",
        METRICS: "/metrics",
    }


class Client(threading.Thread):
    """One client: its own sessions (keep-alive connections) with the admin's credentials, asking each of
    `endpoints` once a round, `rounds` times (a scraper: /metrics once every `interval_s` until stopped)."""

    def __init__(
        self, *, admin: Admin, url: str, flow_ids: list[int], endpoints, rounds: int, seed: int
    ) -> None:
        import requests

        super().__init__(daemon=True)
        self.url, self.flow_ids, self.endpoints, self.rounds = url, flow_ids, list(endpoints), rounds
        self.random = random.Random(seed)
        self.sessions = {}
        for name, source in (("browser", admin.browser), ("api", admin.api), (METRICS, admin.metrics)):
            session = requests.Session()
            session.headers.update(source.headers)
            session.cookies.update(source.cookies)
            self.sessions[name] = session
        self.timings: dict[str, list[float]] = {name: [] for name in self.endpoints}
        self.failures: list[str] = []
        self.gate: threading.Barrier | None = None
        self.interval_s: float | None = None
        self.stop = threading.Event()

    def _get(self, endpoint: str, path: str) -> None:
        session = self.sessions[
            endpoint
            if endpoint == METRICS
            else "api"
            if "API" in endpoint or endpoint == "flow status"
            else "browser"
        ]
        started = time.perf_counter()
        try:
            answer = session.get(self.url + path, timeout=60)
        except requests.ConnectionError:  # a keep-alive connection gunicorn closed (--keep-alive 2 s) as it
            answer = session.get(self.url + path, timeout=60)  # was reused: a browser asks again too
        answer.content  # noqa: B018 (the whole body read: what a client waits for)
        self.timings[endpoint].append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            self.failures.append(f"{path}: {answer.status_code}")

    def run(self) -> None:
        if self.gate is not None:
            self.gate.wait()
        if self.interval_s is not None:
            while not self.stop.is_set():
                self._get(METRICS, "/metrics")
                self.stop.wait(self.interval_s)
            return
        for _ in range(self.rounds):
            paths = _paths(self.random.choice(self.flow_ids))
            self.random.shuffle(self.endpoints)
            for endpoint in self.endpoints:
                self._get(endpoint, paths[endpoint])


def drive(
    *,
    admin: Admin,
    url: str,
    flow_ids: list[int],
    clients: int,
    rounds: int,
    endpoints,
    scrape_interval_s: float | None = None,
) -> tuple[dict[str, list[float]], list[str]]:
    """`clients` clients asking each of `endpoints` `rounds` times at once (and /metrics scraped once every
    `scrape_interval_s` meanwhile): the sorted timings (ms) per endpoint and the failures."""
    threads = [
        Client(admin=admin, url=url, flow_ids=flow_ids, endpoints=endpoints, rounds=rounds, seed=index)
        for index in range(clients)
    ]
    gate = threading.Barrier(clients)
    for thread in threads:
        thread.gate = gate
    scraper = None
    if scrape_interval_s is not None:
        scraper = Client(admin=admin, url=url, flow_ids=flow_ids, endpoints=[METRICS], rounds=0, seed=-1)
        scraper.interval_s = scrape_interval_s
        scraper.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if scraper is not None:
        scraper.stop.set()
        scraper.join()
        threads.append(scraper)
    names = {name for thread in threads for name in thread.timings}
    timings = {name: sorted(t for thread in threads for t in thread.timings.get(name, ())) for name in names}
    return timings, [failure for thread in threads for failure in thread.failures]


def _web_cpu_s(web) -> float:
    """CPU seconds the web (gunicorn's master and workers) used so far."""
    return sum(process_cpu_s(pid) for pid in (web.process.pid, *child_pids(web.process.pid)))


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


RENDER_MODES = ("scrape", "ahead")


class Renderer:
    """/metrics rendered ahead as shipped (controlplane/metrics/rendered.py): a Celery worker of the
    `metadata` queue with the docs' pool, and in place of beat (whose supervisor would start chains for the
    fleet's 500 flows, whose clusters do not exist) a thread queueing `render_exposition` every
    METRICS_RENDER_INTERVAL_S, as beat's `dispatch_render` does."""

    def __init__(self, *, workdir: Path, env: dict[str, str]) -> None:
        from harness.runtime import CeleryRuntime

        self.runtime = CeleryRuntime(workdir=workdir, redis_url=env["REDIS_URL"], env=env)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._dispatch, daemon=True)

    def start(self) -> Renderer:
        self.runtime.start_worker("metadata", queues="metadata")
        self.runtime.wait_ready("metadata")
        self.thread.start()
        return self

    def _dispatch(self) -> None:
        from django.conf import settings

        from workers.exposition import render_exposition

        while not self.stop.is_set():
            render_exposition.apply_async(expires=settings.METRICS_RENDER_INTERVAL_S)
            self.stop.wait(settings.METRICS_RENDER_INTERVAL_S)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.runtime.close()


def measure(args, *, admin, flow_ids: list[int], endpoints, scrape_interval_s, mode: str, workdir: Path):
    """One run against a gunicorn whose /metrics is read by each scrape (`scrape`) or rendered ahead
    (`ahead`): the lone and concurrent timings, the web's CPU per request, the load before and after."""
    from django.conf import settings

    from harness.runtime import Gunicorn, database_url, dockerfile_gunicorn_flags

    env = {**os.environ, "DATABASE_URL": database_url(), "PYTHONUNBUFFERED": "1"}
    env.pop("DEBUG", None)
    env.setdefault("REDIS_URL", settings.REDIS_URL)
    env["METRICS_BEARER_TOKEN"] = admin.metrics_token
    env["METRICS_RENDER_INTERVAL_S"] = "0" if mode == "scrape" else env.get("METRICS_RENDER_INTERVAL_S", "5")
    renderer = Renderer(workdir=workdir, env=env).start() if mode == "ahead" else None
    web = Gunicorn(env=env, log=workdir / f"web-{mode}.log", args=dockerfile_gunicorn_flags()).start()
    try:
        admin.sign_in(web.url)
        run = {"admin": admin, "url": web.url, "flow_ids": flow_ids[:1] if args.one_flow else flow_ids}
        # Warm-up: every worker process imports its views and fills its caches before anything counts.
        drive(**run, clients=args.clients, rounds=2, endpoints=(*ENDPOINTS, METRICS))
        load_before = _load()
        cpu_started = _web_cpu_s(web)
        alone, failures = drive(**run, clients=1, rounds=args.rounds, endpoints=endpoints)
        cpu_alone = (_web_cpu_s(web) - cpu_started) / sum(map(len, alone.values()))
        if scrape_interval_s is not None:
            scrapes, scrape_failures = drive(**run, clients=1, rounds=LONE_SCRAPES, endpoints=[METRICS])
            alone[METRICS] = scrapes[METRICS]
            failures += scrape_failures
        cpu_started = _web_cpu_s(web)
        together, more_failures = drive(
            **run,
            clients=args.clients,
            rounds=args.rounds,
            endpoints=endpoints,
            scrape_interval_s=scrape_interval_s,
        )
        cpu_together = (_web_cpu_s(web) - cpu_started) / sum(map(len, together.values()))
        load_after = _load()
    finally:
        web.kill()
        if renderer is not None:
            renderer.close()
    return {
        "alone": alone,
        "together": together,
        "failures": failures + more_failures,
        "cpu": (cpu_alone, cpu_together),
        "load": (load_before, load_after),
    }


def report(args, result: dict, *, mode: str, scrape_interval_s) -> list[str]:
    """Prints one run; the endpoints that missed their target."""
    alone, together = result["alone"], result["together"]
    print(
        f"  /metrics {'rendered ahead by a metadata worker' if mode == 'ahead' else 'read by each scrape'}: "
        f"load average before {result['load'][0]}, after {result['load'][1]} ({os.cpu_count()} CPUs)"
    )
    print(
        f"  web CPU per request (gunicorn's processes): alone {result['cpu'][0] * 1000:.1f} ms, "
        f"at {args.clients} clients {result['cpu'][1] * 1000:.1f} ms"
    )
    print(f"  {'endpoint':<12} {'alone p50':>10} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}  target (ms)")
    missed = []
    for name in (*ENDPOINTS, METRICS):
        values = together[name]
        scraped = name == METRICS and scrape_interval_s is not None
        target, judged = (
            (SCRAPE_TARGET_S * 1000, values[-1]) if scraped else (TARGET_P99_MS, percentile(values, 0.99))
        )
        print(
            f"  {name:<12} {percentile(alone[name], 0.5):>10.1f} {percentile(values, 0.5):>8.1f} "
            f"{percentile(values, 0.95):>8.1f} {percentile(values, 0.99):>8.1f} {values[-1]:>8.1f}  "
            + (
                f"max < {target:g} ({len(values)} scrapes, one every {scrape_interval_s:g} s)"
                if scraped
                else f"p99 < {target:g}"
            )
        )
        if judged >= target:
            missed.append(name)
    for failure in sorted(set(result["failures"])):
        print(f"  not a 200: {failure}")
    verdict = (
        "met" if not missed and not result["failures"] else f"MISSED ({', '.join(missed) or 'failures'})"
    )
    print(f"  target at {args.clients} clients: {verdict}")
    return missed + list(result["failures"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench api")
    parser.add_argument("--flows", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=50, help="requests per endpoint per client")
    parser.add_argument("--scrape-interval", type=float, default=5.0, help="seconds between /metrics scrapes")
    parser.add_argument(
        "--metrics-in-mix", action="store_true", help="/metrics as every client's fifth endpoint"
    )
    parser.add_argument(
        "--one-flow",
        action="store_true",
        help="every client asks for the same flow's page and status (an on-call team watching one flow)",
    )
    parser.add_argument(
        "--metrics-render",
        choices=(*RENDER_MODES, "both"),
        default="both",
        help="/metrics read by each scrape, rendered ahead by a metadata worker (as shipped), or both in turn",
    )
    args = parser.parse_args(argv)
    endpoints = (*ENDPOINTS, METRICS) if args.metrics_in_mix else ENDPOINTS
    scrape_interval_s = None if args.metrics_in_mix else args.scrape_interval
    modes = RENDER_MODES if args.metrics_render == "both" else (args.metrics_render,)

    workdir = Path(tempfile.mkdtemp(prefix="bench-api-"))
    with scratch_database():
        from harness.runtime import dockerfile_gunicorn_flags

        flow_ids = [flow.pk for flow in seed_fleet(flows=args.flows, partitions=args.partitions)]
        admin = Admin.create("api-bench")
        results = {
            mode: measure(
                args,
                admin=admin,
                flow_ids=flow_ids,
                endpoints=endpoints,
                scrape_interval_s=scrape_interval_s,
                mode=mode,
                workdir=workdir,
            )
            for mode in modes
        }

    print(
        f"API and pages, {args.flows} flows x {args.partitions} partitions"
        + (" (every client on one flow)" if args.one_flow else "")
        + f", gunicorn {' '.join(dockerfile_gunicorn_flags())}; "
        f"{args.clients} clients x {args.rounds} rounds (logs: {workdir})"
    )
    missed = [report(args, results[mode], mode=mode, scrape_interval_s=scrape_interval_s) for mode in modes]
    return 0 if not missed[-1] else 1
