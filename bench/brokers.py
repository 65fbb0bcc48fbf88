"""The brokers every benchmark runs on: two Apache Kafka 4.x single-node KRaft clusters on loopback (the
broker our users run), or the embedded broker with MIRRORPLANE_BENCH_KAFKA=embedded (to compare). The
embedded broker holds every fetch for fetch.wait.max.ms, the engine's default of 500 ms too: there the
benches' clusters (`bench_cluster`, `stored_cluster`) ask every 10 ms, as the demo's flows do."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from replication.config import ClusterConfig
from replication.kafka.apache import apache_clusters, kafka_version
from replication.kafka.embedded import EMBEDDED_CONSUMER_PROPERTIES, embedded_clusters

KIND = os.environ.get("MIRRORPLANE_BENCH_KAFKA", "apache")


@contextlib.contextmanager
def bench_clusters(aliases: list[str], *, heap: str = "1g", nodes: int = 1) -> Iterator[dict]:
    """One cluster per alias: Apache Kafka of `nodes` brokers (each JVM's -Xmx `heap`), or tansu."""
    if KIND == "embedded":
        print("brokers: embedded tansu (MIRRORPLANE_BENCH_KAFKA=embedded)", flush=True)
        if nodes > 1:
            raise SystemExit("the embedded broker runs one node per cluster: leave out --brokers-per-cluster")
        with embedded_clusters(aliases) as brokers:
            yield brokers
        return
    print(f"brokers: Apache Kafka {kafka_version()} (KRaft, {nodes} node(s) per cluster)", flush=True)
    with apache_clusters(aliases, heap=heap, nodes=nodes) as brokers:
        yield brokers


def bench_cluster(alias: str, brokers: dict) -> ClusterConfig:
    """Cluster `alias` of `bench_clusters`, with the consumer settings its broker needs."""
    consumer = EMBEDDED_CONSUMER_PROPERTIES if KIND == "embedded" else {}
    return ClusterConfig(alias=alias, bootstrap_servers=brokers[alias].bootstrap_servers, consumer=consumer)


def stored_cluster(config: ClusterConfig):
    """The control plane's cluster `config.alias` (a runtime bench's Django database), stored the first
    time with the config's bootstrap servers and consumer settings."""
    from controlplane.flows import services
    from controlplane.flows.models import Cluster

    return Cluster.objects.filter(alias=config.alias).first() or services.cluster_create(
        actor=None,
        alias=config.alias,
        bootstrap_servers=config.bootstrap_servers,
        client_properties={"consumer": dict(config.consumer)},
    )
