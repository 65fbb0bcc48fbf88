"""How `make test` shares the suite among its xdist workers (tests/scheduling.py, tests/environment.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.environment import REDIS_URLS, redis_urls_of_worker
from tests.scheduling import (
    SHARED_FIXTURES,
    SharedFixtureScheduling,
    check_shared_fixtures,
    longest_files_first,
    slowest_files,
)


@dataclass
class Item:
    nodeid: str
    fixturenames: tuple[str, ...] = ()


def test_the_files_of_a_shared_fixture_are_one_unit_run_together_longest_unit_first():
    jobs, windowed = "tests/dashboards/test_jobs.py", "tests/dashboards/test_windowed.py"
    assert {jobs, windowed} <= set(SHARED_FIXTURES["spark"])
    items = [
        Item("tests/replication/test_source_task.py::test_a"),
        Item(f"{windowed}::test_b", ("spark",)),
        Item("tests/web/test_small.py::test_c"),
        Item("tests/workers/test_shared_lake_cluster.py::test_d"),
        Item(f"{jobs}::test_e", ("spark",)),
        Item("tests/replication/test_source_task.py::test_f"),
    ]
    # Shared lake (133 s), then the Spark unit (104 + 0 s: its longest file first), then the source task
    # file (58 s) with its tests in their order, then a file of unknown length.
    assert longest_files_first(items) == [items[3], items[4], items[1], items[0], items[5], items[2]]
    scheduler = SharedFixtureScheduling.__new__(SharedFixtureScheduling)
    assert {scheduler._split_scope(items[i].nodeid) for i in (1, 4)} == {"[spark]"}
    assert scheduler._split_scope(items[0].nodeid) == "tests/replication/test_source_task.py"


@dataclass
class Report:
    nodeid: str
    when: str
    duration: float


def test_the_slowest_files_sum_the_setup_call_and_teardown_of_their_tests():
    a, b, c = "tests/workers/test_a.py", "tests/web/test_b.py", "tests/test_c.py"
    reports = [
        Report(f"{a}::test_1", "setup", 20.0),  # a session fixture started for it
        Report(f"{a}::test_1", "call", 5.0),
        Report(f"{a}::test_2", "call", 4.0),
        Report(f"{a}::test_2", "teardown", 1.0),
        Report(f"{b}::test_3", "call", 29.0),
        Report(f"{c}::test_4", "call", 1.0),
        Report(c, "collect", 9.0),  # not a test's
    ]
    assert slowest_files(reports, count=2) == [(a, 30.0), (b, 29.0)]


def test_a_file_using_a_shared_fixture_it_is_not_listed_with_fails_the_collection_naming_it():
    check_shared_fixtures([Item(f"{SHARED_FIXTURES['secure_clusters'][0]}::test", ("secure_clusters",))])
    with pytest.raises(pytest.UsageError, match=r"tests/web/test_new\.py \(schema_registries\)"):
        check_shared_fixtures([Item("tests/web/test_new.py::test", ("db", "schema_registries"))])


def test_each_of_three_workers_has_redis_databases_of_its_own():
    databases = [
        {url.rsplit("/", 1)[1] for url in redis_urls_of_worker(REDIS_URLS, worker).values()}
        for worker in range(3)
    ]
    assert all(len(numbers) == 3 for numbers in databases)
    assert (
        not (databases[0] & databases[1])
        and not (databases[0] & databases[2])
        and not (databases[1] & databases[2])
    )
