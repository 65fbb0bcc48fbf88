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

Only the first `HEAVY_WORKERS` workers run heavy units (`unit_is_heavy`: a test that starts or uses a
broker, a replication runtime, a browser or a JVM); any worker past them runs only light ones (the web,
the API and the domain on PostgreSQL and Redis). Three workers that all ran brokers held the 2-core machine
at load 6-9, and timing-sensitive Kafka tests failed (Makefile, PYTEST_WORKERS); a third worker that
runs none takes a share of the suite off the two that do.

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


def file_of(nodeid: str) -> str:
    return nodeid.partition("::")[0]


def unit_of(file: str) -> str:
    """The unit of work `file` belongs to: the name of its shared fixture in brackets, or itself."""
    return _UNIT_OF_FILE.get(file, file)


def item_is_heavy(item: pytest.Item) -> bool:
    """Whether a test starts or uses a broker, a runtime, a registry, a browser or a JVM (its marks and
    fixtures)."""
    marks = {mark.name for mark in getattr(item, "iter_markers", lambda: ())()}
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(marks.intersection(HEAVY_MARKS) or fixtures.intersection(HEAVY_FIXTURES))


@functools.cache
def file_is_heavy(file: str) -> bool:
    """Whether the file at `file` (relative to the repository) reads as heavy (`_HEAVY_TEXT`)."""
    path = ROOT / file
    return not path.is_file() or bool(_HEAVY_TEXT.search(path.read_text()))


def unit_is_heavy(unit: str) -> bool:
    """A unit of a shared fixture (a JVM) is heavy, a file as it reads (`file_is_heavy`)."""
    return unit.startswith("[") or file_is_heavy(unit)


def check_heavy_files(items: Sequence[pytest.Item]) -> None:
    """Fails the collection when a heavy test's file does not read as heavy (it could run on a light worker)."""
    missed = sorted(
        {file_of(item.nodeid) for item in items if item_is_heavy(item)}
        - {file for file in {file_of(item.nodeid) for item in items} if file_is_heavy(file)}
    )
    if missed:
        raise pytest.UsageError(
            "tests/scheduling.py: these files have heavy tests (HEAVY_MARKS, HEAVY_FIXTURES) that "
            "_HEAVY_TEXT does not find in them; add the fixture they use to it: " + ", ".join(missed)
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
        """The first unit in the queue this worker runs: a heavy worker its first heavy unit, else a light
        one; a light worker (past HEAVY_WORKERS) its first light unit, and it stops once none is left."""
        heavy = takes_heavy(node.gateway.id)
        unit = next((u for u in self.workqueue if unit_is_heavy(u)), None) if heavy else None
        if unit is None:
            unit = next((u for u in self.workqueue if not unit_is_heavy(u)), None)
        if unit is None:
            if not heavy and not self._pending_of(self.assigned_work[node]):
                node.shutdown()
            return
        self.workqueue.move_to_end(unit, last=False)
        super()._assign_work_unit(node)


def takes_heavy(worker: str) -> bool:
    """Whether xdist's worker `worker` (gw0, gw1...) runs heavy units: the first HEAVY_WORKERS do."""
    return int(worker.removeprefix("gw")) < HEAVY_WORKERS
