"""How `make test` shares the suite among its xdist workers (tests/scheduling.py, tests/environment.py)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import pytest

from tests.environment import REDIS_URLS, redis_urls_of_worker
from tests.scheduling import (
    SHARED_FIXTURES,
    SharedFixtureScheduling,
    check_heavy_files,
    check_shared_fixtures,
    longest_files_first,
    slowest_files,
    unit_weight,
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


@dataclass
class Gateway:
    id: str


@dataclass
class Worker:
    """An xdist worker as the scheduler sees it: what it was sent to run, whether it was told to stop."""

    gateway: Gateway
    sent: list[int] = field(default_factory=list)
    stopped: bool = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.stopped = True

    def __hash__(self) -> int:
        return hash(self.gateway.id)


def test_a_worker_past_the_heavy_ones_runs_no_unit_using_a_broker_and_stops_when_only_those_are_left():
    broker, light = "tests/replication/test_source_task.py", "tests/controlplane/api/test_api.py"
    spark, kill9 = "tests/dashboards/test_jobs.py", "tests/replication/test_kill9.py"
    collection = [f"{broker}::test_a", f"{light}::test_b", f"{spark}::test_c", f"{kill9}::test_d"]
    assert [unit_weight(SharedFixtureScheduling._split_scope(None, n)) for n in collection] == [2, 0, 1, 2]
    scheduler = SharedFixtureScheduling.__new__(SharedFixtureScheduling)
    workers = [Worker(Gateway(f"gw{i}")) for i in range(3)]
    scheduler.assigned_work = {worker: {} for worker in workers}
    scheduler.registered_collections = dict.fromkeys(workers, collection)
    scheduler.workqueue = OrderedDict(
        (scheduler._split_scope(nodeid), {nodeid: False}) for nodeid in collection
    )
    scheduler._assign_work_unit(workers[2])  # the third: the light file first, though it comes second
    scheduler._assign_work_unit(workers[0])  # a heavy one: the first unit using a broker
    assert (workers[2].sent, workers[0].sent) == ([1], [0])
    scheduler._assign_work_unit(workers[2])  # then a heavy unit that uses no broker (Spark)
    assert workers[2].sent == [1, 2]
    scheduler._assign_work_unit(workers[2])  # only a unit using a broker is left: not for it
    assert workers[2].sent == [1, 2] and not workers[2].stopped  # its own tests still run
    for unit in scheduler.assigned_work[workers[2]].values():
        unit.update(dict.fromkeys(unit, True))
    scheduler._assign_work_unit(workers[2])
    assert workers[2].stopped and workers[2].sent == [1, 2]
    scheduler._assign_work_unit(workers[1])
    assert workers[1].sent == [3] and not scheduler.workqueue


def test_a_heavy_test_in_a_file_the_scheduler_reads_as_light_fails_the_collection():
    light = "tests/controlplane/api/test_api.py"
    check_heavy_files([Item(f"{light}::test", ("db", "client"))])
    with pytest.raises(pytest.UsageError, match=r"tests/controlplane/api/test_api\.py"):
        check_heavy_files([Item(f"{light}::test", ("db", "celery_runtime"))])
    spark = "tests/dashboards/test_jobs.py"  # heavy, and reads as using no broker
    check_heavy_files([Item(f"{spark}::test", ("spark",))])
    with pytest.raises(pytest.UsageError, match=r"tests/dashboards/test_jobs\.py"):
        check_heavy_files([Item(f"{spark}::test", ("spark", "kafka_brokers"))])
