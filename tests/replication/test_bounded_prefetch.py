"""Consumers that cap librdkafka's prefetch over many partitions (`replication.kafka.clients.BOUNDED_PREFETCH`),
and every other consumer, do not idle a second at librdkafka's prefetch thresholds
(`FETCH_QUEUE_BACKOFF_MS`, `make_consumer`): with `fetch.queue.backoff.ms` at its 1 s default a
verification read of 500 partitions x 100 records took 5 s instead of 0.4 s, and of 100 partitions x 1,000
records of 1 KB, 37 s: past the 10 s a read may take, so such ranges were put off run after run."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.config import ClusterConfig, FlowConfig
from replication.kafka import browser, clients, failover_io, verification_io
from replication.kafka.clients import FETCH_QUEUE_BACKOFF_MS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "settings",
    [
        verification_io.READER_OVERRIDES,
        browser._FETCH_LIMITS,
        browser._END_FETCH,
        failover_io.FIRST_RECORDS_READER,
    ],
    ids=["verification ranges", "browsing", "browsing ends", "failover first records"],
)
def test_every_bounded_reader_caps_its_prefetch(settings):
    assert settings["queued.max.messages.kbytes"] <= 1_024


def test_a_prefetch_cap_is_set_in_one_place():
    """Any consumer capping `queued.max.messages.kbytes` below the engine's 64 MB takes BOUNDED_PREFETCH."""
    setting = '"queued.max.messages.kbytes"'
    found = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "replication").rglob("*.py")
        if setting in path.read_text()
    }
    assert found == {"replication/kafka/clients.py", "replication/kafka/source_io.py"}, found


def test_every_consumer_fetches_again_soon_after_its_prefetch_thresholds():
    """`make_consumer` gives every consumer (the task's, its positions' and offset syncs' readers, the
    verifier's...) the 10 ms backoff; a cluster's own setting wins, and a flow's for its task."""
    from replication.kafka.source_io import source_consumer_overrides

    cluster = ClusterConfig(alias="A", bootstrap_servers="127.0.0.1:1")
    tuned = ClusterConfig(
        alias="A", bootstrap_servers="127.0.0.1:1", consumer={"fetch.queue.backoff.ms": "50"}
    )
    flow = FlowConfig(source="A", target="B", extra={"consumer.fetch.queue.backoff.ms": "5"})
    backoff = [
        clients.consumer_properties(cluster)["fetch.queue.backoff.ms"],
        clients.consumer_properties(tuned)["fetch.queue.backoff.ms"],
        clients.consumer_properties(
            tuned, overrides=source_consumer_overrides(FlowConfig(source="A", target="B"), tuned)
        )["fetch.queue.backoff.ms"],
        clients.consumer_properties(cluster, overrides=source_consumer_overrides(flow, cluster))[
            "fetch.queue.backoff.ms"
        ],
    ]
    assert backoff == [FETCH_QUEUE_BACKOFF_MS, "50", "50", "5"]
    assert FETCH_QUEUE_BACKOFF_MS == 10
