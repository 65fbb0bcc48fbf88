"""The verifier's allowance per run follows the time since the last run started (one run at a time: a
long run makes the next ticks skip), stored in the cache every worker shares."""

from __future__ import annotations

import logging
import re
import time

import pytest
from django.core.cache import cache

from workers import verification as worker


@pytest.fixture
def clean_cache():
    cache.delete_many([worker.STARTED_KEY, worker.RUNNING_KEY])
    yield
    cache.delete_many([worker.STARTED_KEY, worker.RUNNING_KEY])


def _allowance(caplog) -> int:
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("verification run:")]
    return int(re.search(r"allowance of (\d+) bytes", line).group(1))


def test_a_run_after_a_long_one_reads_the_time_since_it_started(
    transactional_db, settings, caplog, clean_cache
):
    settings.VERIFY_MAX_BYTES_PER_S, settings.VERIFY_INTERVAL_S = 1_000_000, 10
    caplog.set_level(logging.INFO, logger="workers.verification")
    worker.verify_flows()  # the first: one interval's allowance
    assert _allowance(caplog) == 10_000_000
    assert abs(cache.get(worker.STARTED_KEY) - time.time()) < 5
    caplog.clear()
    cache.set(worker.STARTED_KEY, time.time() - 25, timeout=None)  # the last run started 25 s ago
    worker.verify_flows()
    assert 25_000_000 <= _allowance(caplog) < 26_000_000
    caplog.clear()
    cache.set(worker.STARTED_KEY, time.time() - 600, timeout=None)  # long idle: three intervals at most
    worker.verify_flows()
    assert _allowance(caplog) == 30_000_000
