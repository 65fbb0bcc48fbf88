"""The order the suite's files run in: the longest first (`pytest_collection_modifyitems` in conftest).

`make test` runs two pytest-xdist workers with `--dist loadfile`: a file is one unit of work, and a worker
takes the next units while it still has two tests or fewer to run, so it holds the next one-test files
before it starts them. xdist's own order (most tests first) put the one-test runtime files, the slowest
of the suite, at the end: one worker ran them one after the other while the other had nothing left.
Longest first (then most tests first, as xdist does) leaves short files for the end, which even out.

The seconds are one file's tests on the 2-core CI machine, two workers (`--durations`, November 2026):
an order, not a promise. A file that becomes slow belongs here; one missing only runs later.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

SLOW_FILES = {
    "tests/workers/test_shared_lake_cluster.py": 135,
    "tests/workers/test_operations_runtime.py": 134,
    "tests/failover/test_failover_e2e.py": 110,
    "tests/workers/test_isolation.py": 96,
    "tests/workers/test_network_partition.py": 92,
    "tests/workers/test_reports_runtime.py": 91,
    "tests/workers/test_failures.py": 70,
    "tests/replication/test_broker_faults.py": 69,
    "tests/dashboards/test_report_pipeline.py": 60,
    "tests/replication/test_mm2_interop.py": 60,
    "tests/dashboards/test_lake_location.py": 50,
    "tests/workers/test_rolling_upgrade.py": 45,
    "tests/replication/test_apache_kafka.py": 40,
    "tests/workers/test_alerts_runtime.py": 36,
    "tests/e2e/test_web_ui.py": 35,
    "tests/failover/test_cutover.py": 28,
}


def longest_files_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """`items` ordered by file: known slow files by their seconds, then by number of tests, both longest
    first; a file's tests stay together and in their order (a stable sort)."""
    files = [item.nodeid.partition("::")[0] for item in items]
    tests_per_file = Counter(files)
    order = sorted(
        range(len(items)), key=lambda i: (-SLOW_FILES.get(files[i], 0), -tests_per_file[files[i]], files[i])
    )
    return [items[i] for i in order]
