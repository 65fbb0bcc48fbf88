"""The order the suite's files run in: the longest first (`pytest_collection_modifyitems` in conftest).

`make test` runs two pytest-xdist workers with `--dist loadfile`: a file is one unit of work, and a worker
takes the next units while it still has two tests or fewer to run, so it holds the next one-test files
before it starts them. xdist's own order (most tests first) put the one-test runtime files, the slowest
of the suite, at the end: one worker ran them one after the other while the other had nothing left.
Longest first (then most tests first, as xdist does) leaves short files for the end, which even out.

The seconds are one file's tests on the 2-core CI machine, two workers (`--durations` of the CI runs of
November 26 2026, scaled by what each file measured alone after the changes of that day): an order, not
a promise. A file that becomes slow belongs here; one missing only runs later.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

SLOW_FILES = {
    "tests/failover/test_failover_e2e.py": 100,
    "tests/workers/test_shared_lake_cluster.py": 100,
    "tests/workers/test_operations_runtime.py": 95,
    "tests/workers/test_network_partition.py": 92,
    "tests/workers/test_failures.py": 70,
    "tests/workers/test_isolation.py": 65,
    "tests/replication/test_broker_faults.py": 65,
    "tests/controlplane/test_security_findings.py": 60,
    "tests/dashboards/test_jobs.py": 60,
    "tests/replication/test_mm2_interop.py": 55,
    "tests/workers/test_reports_runtime.py": 45,
    "tests/dashboards/test_report_pipeline.py": 45,
    "tests/workers/test_rolling_upgrade.py": 45,
    "tests/dashboards/test_lake_location.py": 40,
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
