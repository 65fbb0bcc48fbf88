"""How `make test` shares the suite among its pytest-xdist workers (`--dist loadfile`, the hooks in
tests/conftest.py).

A unit of work is a file, or a group of files that share a costly session fixture (`SHARED_FIXTURES`):
each worker is a suite of its own (tests/environment.py), so a session fixture starts once on every worker
that runs one of its files. Spread over three workers, the SparkSession, the SASL_SSL clusters and the
schema registries each started three times; their JVMs then idled beside the brokers until the session
ended, and a fresh Spark JVM runs its first jobs slowly: the files that started one took 2-3 times as
long as on a worker that had one. Idle, they cost little (measured November 29 2026, 60 s, load 10-20):
a session broker 1.3% of a core (2.0% before TEST_BROKER_CONFIG's no-op interval, 1.8-2.2% holding
1,000 partitions), a SparkSession's JVM 0.2%, a schema registry 0.2%; so a unit's JVMs stay up until
the worker's session ends, stopping them when the unit's last test ran saved under 20 core-s a run.

The units run longest first: a worker takes the next unit while it still has two tests or fewer to run,
so xdist's own order (most tests first) left the slowest one-test files for the end, one worker running
them one after the other while the others had nothing left. Longest first (then most tests first, as
xdist does) leaves short files for the end, which even out.

Only the first `HEAVY_WORKERS` workers run units that use a Kafka broker (`unit_weight` 2); a worker past
them runs the light units first (the web, the API and the domain on PostgreSQL and Redis: 0), then the
heavy ones that use no broker (Spark, browsers, Celery workers without a flow: 1), and stops when only
broker units are left; the heavy workers take broker units first. Three workers that all ran brokers held
the 2-core machine at load 6-9, and timing-sensitive Kafka tests failed (Makefile, PYTEST_WORKERS). In the
fresh-clone run of December 3 2026 (three workers, the third on light units only) the units took 1,983 s
using a broker, 266 s heavy without one and 400 s light (the sum of their tests' setup, call and teardown).

`SLOW_FILES` are one file's seconds on the 2-core CI machine with three workers (`--durations=0` of a
`make test` run of November 26 2026): an order, not a promise. A file that becomes slow belongs here; one
missing only runs later.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

SLOW_FILES = {
    "tests/workers/test_shared_lake_cluster.py": 133,
    # Estimates from single runs under load (November 28 2026), until a --durations=0 run measures them.
    "tests/workers/test_generations.py": 60,
    "tests/workers/test_verification_scale.py": 45,
    "tests/controlplane/core/test_outbound_bounds.py": 45,
    "tests/web/test_outbound_policy.py": 40,
    # Their fixed waits cut (November 29 2026): CI's figure scaled by their time alone before and after.
    "tests/controlplane/core/test_security_findings.py": 27,
    "tests/e2e/test_topology_and_phone.py": 15,
    "tests/workers/test_failures.py": 89,
    "tests/replication/test_broker_faults.py": 52,
    "tests/workers/test_isolation.py": 42,
    "tests/replication/test_checkpoint.py": 18,
    "tests/workers/test_operations_runtime.py": 119,
    "tests/dashboards/test_jobs.py": 104,
    "tests/workers/test_network_partition.py": 100,
    "tests/failover/test_failover_e2e.py": 93,
    "tests/replication/test_mm2_interop.py": 73,
    "tests/replication/test_apache_kafka.py": 67,
    "tests/workers/test_takeover.py": 66,
    "tests/workers/test_schema_runtime.py": 60,
    "tests/replication/test_source_task.py": 58,
    "tests/dashboards/test_report_pipeline.py": 55,
    "tests/replication/test_run_cli.py": 53,
    "tests/controlplane/api/test_api_schemathesis.py": 47,
    "tests/dashboards/test_lake_location.py": 46,
    "tests/workers/test_reports_runtime.py": 45,
    "tests/replication/test_kill9.py": 43,
    "tests/workers/test_alerts_runtime.py": 42,
    "tests/workers/test_rolling_upgrade.py": 41,
    "tests/e2e/test_web_ui.py": 37,
    "tests/replication/test_schema_replication.py": 37,
    "tests/e2e/test_sso.py": 18,
    "tests/e2e/test_lists_and_charts.py": 33,
    "tests/replication/test_secure_kafka.py": 31,
    "tests/workers/test_runtime.py": 28,
    "tests/workers/test_live_status.py": 27,
    "tests/web/test_topic_size.py": 26,
    "tests/web/test_hostile_input.py": 26,
    "tests/failover/test_cutover.py": 26,
    "tests/workers/test_verification_runtime.py": 25,
    "tests/dashboards/test_capacity.py": 23,
    "tests/failover/test_drills.py": 23,
    "tests/workers/test_metrics_endpoint.py": 19,
}

# Session fixtures that start JVMs, each with the files that use it: those files are one unit of work, so
# one worker starts it. A file that uses one of them must be listed (`check_shared_fixtures` fails the
# collection otherwise); a file that used two would join the two units into one.
SHARED_FIXTURES = {
    "spark": (
        "tests/dashboards/test_capacity.py",
        "tests/dashboards/test_jobs.py",
        "tests/dashboards/test_lag.py",
        "tests/dashboards/test_lake_location.py",
        "tests/dashboards/test_percentiles.py",
        "tests/dashboards/test_report_pipeline.py",
        "tests/dashboards/test_status.py",
        "tests/dashboards/test_throughput_latency.py",
        "tests/dashboards/test_topic_rows.py",
        "tests/dashboards/test_windowed.py",
    ),
    "secure_clusters": (
        "tests/e2e/test_secure_cluster_ui.py",
        "tests/failover/test_secure_flow.py",
        "tests/replication/test_log_dirs.py",
        "tests/replication/test_secure_kafka.py",
        "tests/web/test_topic_size.py",
        "tests/workers/test_acl_sync_events.py",
    ),
    "schema_registries": (
        "tests/controlplane/browse/test_record_decoding.py",
        "tests/replication/test_schema_formats.py",
        "tests/replication/test_schema_hold.py",
        "tests/replication/test_schema_replication.py",
        "tests/replication/test_schema_sync.py",
        "tests/web/test_outbound_policy.py",
        "tests/workers/test_schema_runtime.py",
    ),
}
_UNIT_OF_FILE = {file: f"[{fixture}]" for fixture, files in SHARED_FIXTURES.items() for file in files}


ROOT = Path(__file__).resolve().parents[1]
HEAVY_WORKERS = 2
# What makes a test heavy: its marks, or a fixture that starts a broker, workers, a registry or a JVM.
HEAVY_MARKS = ("kafka", "slow", "e2e")
HEAVY_FIXTURES = (
    "kafka_brokers",
    "secure_clusters",
    "start_broker",
    "schema_registries",
    "spark",
    "celery_runtime",
    "mirrors",
    "s3_server",
)
# What the scheduler reads in a file to call it heavy (it sees node IDs, not the tests): the marks, the
# fixtures and those using them. `check_heavy_files` fails the collection where this misses one.
_HEAVY_TEXT = re.compile(
    r"mark\.(?:"
    + "|".join(HEAVY_MARKS)
    + r")\b|\b(?:"
    + "|".join(HEAVY_FIXTURES)
    + r"|cluster_a|cluster_b)\b"
)


# Of those, what uses a Kafka broker: the tests that the broker's timing fails when the machine is starved.
BROKER_MARKS = ("kafka",)
BROKER_FIXTURES = ("kafka_brokers", "secure_clusters", "start_broker", "schema_registries")
_BROKER_TEXT = re.compile(
    r"mark\.kafka\b|\b(?:" + "|".join(BROKER_FIXTURES) + r"|cluster_a|cluster_b|make_flow)\b"
)


def file_of(nodeid: str) -> str:
    return nodeid.partition("::")[0]


def unit_of(file: str) -> str:
    """The unit of work `file` belongs to: the name of its shared fixture in brackets, or itself."""
    return _UNIT_OF_FILE.get(file, file)


def item_is_heavy(
    item: pytest.Item, marks: Sequence[str] = HEAVY_MARKS, fixtures: Sequence[str] = HEAVY_FIXTURES
) -> bool:
    """Whether a test starts or uses a broker, a runtime, a registry, a browser or a JVM (its marks and
    fixtures); with BROKER_MARKS and BROKER_FIXTURES, a Kafka broker."""
    found = {mark.name for mark in getattr(item, "iter_markers", lambda: ())()}
    return bool(found.intersection(marks) or set(getattr(item, "fixturenames", ())).intersection(fixtures))


@functools.cache
def _reads(file: str, pattern: re.Pattern[str]) -> bool:
    path = ROOT / file
    return not path.is_file() or bool(pattern.search(path.read_text()))


def unit_weight(unit: str) -> int:
    """2: the unit uses a Kafka broker (the SASL_SSL clusters, the registries' or a file reading so:
    `_BROKER_TEXT`); 1: it is heavy otherwise (Spark, Celery workers, a browser: `_HEAVY_TEXT`); 0: light."""
    if unit.startswith("["):
        return 1 if unit == "[spark]" else 2
    if _reads(unit, _BROKER_TEXT):
        return 2
    return 1 if _reads(unit, _HEAVY_TEXT) else 0


def check_heavy_files(items: Sequence[pytest.Item]) -> None:
    """Fails the collection when a heavy test's file does not read as heavy, or one using a broker as
    using one (it could run on the worker that runs neither)."""
    files = {file_of(item.nodeid) for item in items}
    heavy = {file_of(item.nodeid) for item in items if item_is_heavy(item)}
    brokers = {file_of(item.nodeid) for item in items if item_is_heavy(item, BROKER_MARKS, BROKER_FIXTURES)}
    missed = sorted(
        (heavy - {file for file in files if unit_weight(file) > 0})
        | (brokers - {file for file in files if unit_weight(file) > 1})
    )
    if missed:
        raise pytest.UsageError(
            "tests/scheduling.py: these files have heavy tests (HEAVY_MARKS, HEAVY_FIXTURES) or tests using "
            "a broker (BROKER_MARKS, BROKER_FIXTURES) that _HEAVY_TEXT or _BROKER_TEXT does not find in "
            "them; add the fixture they use to it: " + ", ".join(missed)
        )


def check_shared_fixtures(items: Sequence[pytest.Item]) -> None:
    """Fails the collection when a file uses a fixture of SHARED_FIXTURES without being listed with it."""
    missing = sorted(
        {
            (fixture, file_of(item.nodeid))
            for item in items
            for fixture in SHARED_FIXTURES
            if fixture in getattr(item, "fixturenames", ())
            and file_of(item.nodeid) not in SHARED_FIXTURES[fixture]
        }
    )
    if missing:
        raise pytest.UsageError(
            "tests/scheduling.py: add these files to SHARED_FIXTURES, so that one worker starts the fixture: "
            + ", ".join(f"{file} ({fixture})" for fixture, file in missing)
        )


def slowest_files(reports: Iterable[object], *, count: int) -> list[tuple[str, float]]:
    """The `count` files whose tests took longest, setup, call and teardown summed (a report without a
    duration, such as a collection's, counts nothing): what SLOW_FILES orders by."""
    seconds: Counter[str] = Counter()
    for report in reports:
        duration = getattr(report, "duration", None)
        if duration is not None and getattr(report, "when", None) in ("setup", "call", "teardown"):
            seconds[file_of(report.nodeid)] += duration
    return seconds.most_common(count)


def longest_files_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """`items` ordered by unit of work, units by their known seconds, then by number of tests, both longest
    first; a unit's files stay together, longest first, and a file's tests in their order (a stable sort)."""
    files = [file_of(item.nodeid) for item in items]
    units = [unit_of(file) for file in files]
    tests_per_unit = Counter(units)
    seconds_per_unit = Counter()
    for file in set(files):
        seconds_per_unit[unit_of(file)] += SLOW_FILES.get(file, 0)
    order = sorted(
        range(len(items)),
        key=lambda i: (
            -seconds_per_unit[units[i]],
            -tests_per_unit[units[i]],
            units[i],
            -SLOW_FILES.get(files[i], 0),
            files[i],
        ),
    )
    return [items[i] for i in order]


class SharedFixtureScheduling(LoadFileScheduling):
    """`--dist loadfile`, with the files of one shared fixture as one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(file_of(nodeid))

    def _assign_work_unit(self, node) -> None:
        """The first unit in the queue this worker runs: a heavy worker its first unit using a broker,
        else its first heavy one, else a light one; a light worker (past HEAVY_WORKERS) its first light
        unit, else its first heavy one that uses no broker (`unit_weight`), and it stops once none is left."""
        order = (2, 1, 0) if takes_heavy(node.gateway.id) else (0, 1)
        unit = next((u for weight in order for u in self.workqueue if unit_weight(u) == weight), None)
        if unit is None:
            if not self._pending_of(self.assigned_work[node]):
                node.shutdown()
            return
        self.workqueue.move_to_end(unit, last=False)
        super()._assign_work_unit(node)


def takes_heavy(worker: str) -> bool:
    """Whether xdist's worker `worker` (gw0, gw1...) runs heavy units: the first HEAVY_WORKERS do."""
    return int(worker.removeprefix("gw")) < HEAVY_WORKERS
