"""`make demo`'s setup process (run by honcho next to Kafka, web, worker and beat; see Procfile.demo).

Waits for the two embedded clusters, stores them as clusters dc1 and dc2 with the active-active flows
dc1->dc2 (orders, payments) and dc2->dc1 (inventory) through the control plane's services, runs a
traffic generator on each side, prints the URL and the login, and stops the generators on SIGTERM.
Running it again reuses what is stored.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time


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
}


def store_demo_flows(*, servers: dict[str, str]) -> list:
    """Clusters dc1/dc2 at `servers` and the two flows, created or brought up to date."""
    from controlplane.flows import services
    from controlplane.models import Cluster, Flow

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
        settings = DEMO_FLOW_SETTINGS | {"topics": topics}
        flow = Flow.objects.filter(source=clusters[source], target=clusters[target]).first()
        if flow is None:
            flow = services.flow_create(
                actor=None, source=clusters[source], target=clusters[target], **settings
            )
        else:
            flow = services.flow_resume(
                actor=None, flow=services.flow_update(actor=None, flow=flow, **settings)
            )
        flows.append(flow)
    return flows


def banner(*, args: argparse.Namespace, flow_names: list[str]) -> str:
    """What `make demo` prints once everything runs: where to look first (the flows page, where the demo
    admin sees the replication), the login, the API docs."""
    user, password = args.login.split(":", 1)
    return (
        "\nMirrorplane demo is running\n"
        f"  web:   {args.url}flows/   (login {user} / {password}; API: {args.url}api/docs/)\n"
        f"  flows: {', '.join(flow_names)} (exactly_once, 2 tasks each)\n"
        f"  kafka: dc1 {args.dc1}, dc2 {args.dc2}; traffic {args.rate:g}/s on dc1, {args.rate / 2:g}/s on dc2\n"
        "  Ctrl-C stops everything\n"
    )


def main(argv: list[str] | None = None) -> int:
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
    from replication.config import ClusterConfig
    from replication.kafka.traffic import TrafficGenerator

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
    for generator in generators:
        generator.start()
    print(banner(args=args, flow_names=[flow.name for flow in flows]), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    for generator in generators:
        generator.stop()
    for generator in generators:
        generator.join(timeout=15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
