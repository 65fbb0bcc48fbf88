"""`make demo`'s setup process (run by workers.procfile next to Kafka, web, workers and beat; see
Procfile.demo).

Waits for the two clusters, stores them as clusters dc1 and dc2 with the active-active flows dc1->dc2
(orders, payments) and dc2->dc1 (inventory) through the control plane's services, runs a traffic
generator and an application's consumer group on each side (`billing` on dc1's orders and payments,
`stock` on dc2's inventory: they commit, so checkpoints, offset translation and failover have groups to
work on), waits for the web to answer and the workers to replicate, then prints the URL, the login and the metrics token last. Stops
the generators and consumers on SIGTERM. Running it again reuses what is stored.

`python -m workers.demo traffic off` pauses the generators (a failover plan then finds the source
quiet and passes without force); `traffic on` resumes them. The switch is a cache key the setup
process reads every second.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import urllib.error
import urllib.request

from replication.stop_signals import stop_on_signals

TRAFFIC_KEY = "demo:traffic"  # "off" pauses the demo's generators
DEMO_GROUPS = {"dc1": ("billing", ["orders", "payments"]), "dc2": ("stock", ["inventory"])}


def _wait_for_cluster(cluster, timeout_s: float = 60.0) -> None:
    from replication.kafka.admin import TopicAdmin, TopicAdminError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            TopicAdmin(cluster, timeout_s=2).broker_count()
            return
        except TopicAdminError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


DEMO_FLOWS = {
    ("dc1", "dc2"): ["orders", "payments"],
    ("dc2", "dc1"): ["inventory"],
}
DEMO_FLOW_SETTINGS = {
    "enabled": True,
    "delivery_guarantee": "exactly_once",
    "tasks_max": 2,
    "emit_checkpoints_interval_seconds": 5,
    "refresh_topics_interval_seconds": 30,
    # One broker per demo cluster, no authorizer: say so rather than warn about it at every start.
    "replication_factor": 1,
    "checkpoints_topic_replication_factor": 1,
    "heartbeats_topic_replication_factor": 1,
    "offset_syncs_topic_replication_factor": 1,
    "sync_topic_acls_enabled": False,
}


def demo_flow_settings(kafka: str) -> dict:
    """The demo flows' settings on `kafka` (DEMO_KAFKA: embedded or apache). The embedded broker shows
    aborted records to read_committed readers, so its exactly_once runs without transactions, and holds
    every fetch its full wait, so its flows' source consumers ask every 10 ms (a flow override in `extra`,
    set again at every start: a demo moved from one broker to the other keeps no stale override)."""
    from replication.kafka.embedded import EMBEDDED_CONSUMER_PROPERTIES

    embedded = kafka != "apache"
    return DEMO_FLOW_SETTINGS | {
        "exactly_once_transactions": not embedded,
        "extra": {f"consumer.{name}": value for name, value in EMBEDDED_CONSUMER_PROPERTIES.items()}
        if embedded
        else {},
    }


def store_demo_flows(*, servers: dict[str, str]) -> list:
    """Clusters dc1/dc2 at `servers` and the two flows, created or brought up to date."""
    from controlplane.flows import lifecycle, services
    from controlplane.flows.models import Cluster, Flow

    clusters = {}
    for alias, bootstrap in servers.items():
        cluster = Cluster.objects.filter(alias=alias).first()
        if cluster is None:
            cluster = services.cluster_create(actor=None, alias=alias, bootstrap_servers=bootstrap)
        elif cluster.bootstrap_servers != bootstrap:
            cluster = services.cluster_update(
                actor=None, cluster=cluster, changes={"bootstrap_servers": bootstrap}
            )
        clusters[alias] = cluster
    flows = []
    for (source, target), topics in DEMO_FLOWS.items():
        settings = demo_flow_settings(os.environ.get("DEMO_KAFKA") or "embedded") | {"topics": topics}
        flow = Flow.objects.filter(source=clusters[source], target=clusters[target]).first()
        if flow is None:
            flow = services.flow_create(
                actor=None, source=clusters[source], target=clusters[target], **settings
            )
        else:
            flow = services.flow_update(actor=None, flow=flow, **settings)
            if "resume" in lifecycle.allowed_actions(flow.state):
                flow = services.flow_resume(actor=None, flow=flow)
            # Otherwise it runs already, or it is faulted: the workers started before Kafka answered
            # (`make demo KAFKA=apache` again) and it recovers by itself once both clusters answer.
        flows.append(flow)
    return flows


def banner(*, args: argparse.Namespace, flow_names: list[str], metrics_token: str) -> str:
    """What `make demo` prints once everything runs: where to look first (the flows page, where the demo
    admin sees the replication), the login, the API docs, the metrics scrape, the traffic switch."""
    user, password = args.login.split(":", 1)
    metrics = (
        f"curl -H 'Authorization: Bearer {metrics_token}' {args.url}metrics"
        if metrics_token
        else f"{args.url}metrics (signed in)"
    )
    return (
        "\nMirrorplane demo is running\n"
        f"  web:     {args.url}flows/   (login {user} / {password}; API: {args.url}api/docs/)\n"
        f"  flows:   {', '.join(flow_names)} (exactly_once, 2 tasks each)\n"
        f"  kafka:   dc1 {args.dc1}, dc2 {args.dc2}; traffic {args.rate:g}/s on dc1, {args.rate / 2:g}/s on dc2\n"
        f"  groups:  {', '.join(f'{g} on {alias}' for alias, (g, _) in DEMO_GROUPS.items())}\n"
        f"  metrics: {metrics}\n"
        "  traffic: .venv/bin/python -m workers.demo traffic off|on (off: a failover plan passes without force)\n"
        "  logs:    var/demo/logs/; Ctrl-C stops everything (workers first, Kafka last)\n"
    )


def wait_for_web(url: str, *, timeout_s: float = 120.0) -> None:
    """Until `url`healthz answers 200 (the banner must not send anyone to a page that is not up yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the web at {url} did not answer in {timeout_s:g} s: see var/demo/logs/web.log")
        time.sleep(0.5)


def wait_for_replication(flows: list, *, timeout_s: float = 120.0) -> None:
    """Until the workers reported a partition of every flow since now (the banner comes after their
    start-up)."""
    from django.utils import timezone

    from controlplane.status.models import FlowTaskStatus

    since = timezone.now()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fresh = FlowTaskStatus.objects.filter(observed_at__gte=since)
        reported = set(fresh.values_list("flow_id", flat=True).distinct())
        if all(flow.pk in reported for flow in flows):
            return
        time.sleep(1)
    print(f"the workers reported no status in {timeout_s:g} s: see var/demo/logs/worker.log", flush=True)


def traffic_switch(state: str) -> int:
    """`python -m workers.demo traffic off|on`."""
    from django.core.cache import cache

    cache.set(TRAFFIC_KEY, state, timeout=None)
    print(f"demo traffic {state}" + (" (the generators pause within a second)" if state == "off" else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["traffic"]:
        if argv[1:] not in (["on"], ["off"]):
            print("usage: python -m workers.demo traffic on|off", file=sys.stderr)
            return 2
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
        import django

        django.setup()
        return traffic_switch(argv[1])
    parser = argparse.ArgumentParser(prog="python -m workers.demo", description=__doc__)
    parser.add_argument("--dc1", default="127.0.0.1:19092")
    parser.add_argument("--dc2", default="127.0.0.1:19093")
    parser.add_argument("--rate", type=float, default=200.0, help="records per second per generator")
    parser.add_argument("--url", default="http://127.0.0.1:8000/")
    parser.add_argument("--login", default="demo:demo-password", help="user:password of the demo admin")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.core.cache import cache

    from replication.config import ClusterConfig
    from replication.kafka.traffic import GroupConsumer, TrafficGenerator

    servers = {"dc1": args.dc1, "dc2": args.dc2}
    configs = {
        alias: ClusterConfig(alias=alias, bootstrap_servers=bootstrap) for alias, bootstrap in servers.items()
    }
    for config in configs.values():
        _wait_for_cluster(config)
    flows = store_demo_flows(servers=servers)
    generators = [
        TrafficGenerator(cluster=configs["dc1"], topics=DEMO_FLOWS[("dc1", "dc2")], rate_per_s=args.rate),
        TrafficGenerator(cluster=configs["dc2"], topics=DEMO_FLOWS[("dc2", "dc1")], rate_per_s=args.rate / 2),
    ]
    consumers = [
        GroupConsumer(cluster=configs[alias], group=group, topics=topics)
        for alias, (group, topics) in DEMO_GROUPS.items()
    ]
    cache.set(TRAFFIC_KEY, "on", timeout=None)
    for worker in (*generators, *consumers):
        worker.start()
    wait_for_web(args.url)
    wait_for_replication(flows)
    print(
        banner(
            args=args,
            flow_names=[flow.name for flow in flows],
            metrics_token=os.environ.get("METRICS_BEARER_TOKEN", ""),
        ),
        flush=True,
    )
    stop = threading.Event()
    stop_on_signals(stop)
    while not stop.wait(1.0):
        try:
            paused = cache.get(TRAFFIC_KEY) == "off"
        except Exception:  # Redis restarting: keep the generators as they are
            continue
        for generator in generators:
            generator.pause(paused)
    for worker in (*generators, *consumers):
        worker.stop()
    for worker in (*generators, *consumers):
        worker.join(timeout=15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
