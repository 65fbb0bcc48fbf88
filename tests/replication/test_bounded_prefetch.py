"""Consumers that cap librdkafka's prefetch over many partitions do not idle a second at the cap
(`replication.kafka.clients.BOUNDED_PREFETCH`): with `fetch.queue.backoff.ms` at its 1 s default a
verification read of 500 partitions x 100 records took 5 s instead of 0.4 s, and of 100 partitions x 1,000
records of 1 KB, 37 s: past the 10 s a read may take, so such ranges were put off run after run."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.kafka import browser, failover_io, verification_io
from replication.kafka.clients import BOUNDED_PREFETCH

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
def test_every_bounded_reader_fetches_again_soon_after_its_cap(settings):
    assert settings["queued.max.messages.kbytes"] <= 1_024
    assert settings["fetch.queue.backoff.ms"] <= 10


def test_a_prefetch_cap_is_set_in_one_place():
    """Any consumer capping `queued.max.messages.kbytes` below the engine's 64 MB takes BOUNDED_PREFETCH."""
    assert BOUNDED_PREFETCH["fetch.queue.backoff.ms"] == 10
    setting = '"queued.max.messages.kbytes"'
    found = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "replication").rglob("*.py")
        if setting in path.read_text()
    }
    assert found == {"replication/kafka/clients.py", "replication/kafka/source_io.py"}, found


def test_the_engines_consumer_fetches_again_soon_after_its_thresholds():
    """The source consumer of every task (64 MB or 100,000 records per partition queued): a task catching up
    drains a full queue in under a second, then waited out librdkafka's 1 s backoff."""
    from replication.kafka.source_io import CONSUMER_DEFAULTS

    assert CONSUMER_DEFAULTS["fetch.queue.backoff.ms"] == 10
