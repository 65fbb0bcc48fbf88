"""The brokers every benchmark runs on: two Apache Kafka 4.x single-node KRaft clusters on loopback (the
broker our users run), or the embedded broker with MIRRORPLANE_BENCH_KAFKA=embedded (to compare). The
embedded broker holds every fetch for fetch.wait.max.ms: the engine's default there is 500 ms, so a bench
the benches' clusters (`bench_cluster`) ask every 10 ms there, as the demo's flows do."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from replication.config import ClusterConfig
from replication.kafka.apache import apache_clusters, kafka_version
from replication.kafka.embedded import EMBEDDED_CONSUMER_PROPERTIES, embedded_clusters

KIND = os.environ.get("MIRRORPLANE_BENCH_KAFKA", "apache")


@contextlib.contextmanager
def bench_clusters(aliases: list[str]) -> Iterator[dict]:
    if KIND == "embedded":
        print("brokers: embedded tansu (MIRRORPLANE_BENCH_KAFKA=embedded)", flush=True)
        with embedded_clusters(aliases) as brokers:
            yield brokers
        return
    print(f"brokers: Apache Kafka {kafka_version()} (KRaft, one node per cluster)", flush=True)
    with apache_clusters(aliases) as brokers:
        yield brokers


def bench_cluster(alias: str, brokers: dict) -> ClusterConfig:
    """Cluster `alias` of `bench_clusters`, with the consumer settings its broker needs."""
    consumer = EMBEDDED_CONSUMER_PROPERTIES if KIND == "embedded" else {}
    return ClusterConfig(alias=alias, bootstrap_servers=brokers[alias].bootstrap_servers, consumer=consumer)
