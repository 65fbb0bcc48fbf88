"""`python -m replication translate-offsets`: a group's translated offsets as JSON, from checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replication.formats import Checkpoint
from replication.kafka.internal_topics import InternalTopicWriter

pytestmark = pytest.mark.kafka


@pytest.fixture
def mm2_properties(tmp_path: Path, cluster_a, cluster_b) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {cluster_a.bootstrap_servers}\n"
        f"B.bootstrap.servers = {cluster_b.bootstrap_servers}\n"
        "A->B.enabled = true\n"
    )
    return path


def _translate(properties: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replication", "translate-offsets", str(properties), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_translate_offsets_prints_the_latest_checkpoint_per_partition(mm2_properties, cluster_b, unique_name):
    group = unique_name
    writer = InternalTopicWriter(cluster_b, "A.checkpoints.internal", replication_factor=1)
    try:
        writer.write(
            [
                (c.key(), c.value())
                for c in (
                    Checkpoint(group, "A.orders", 0, 100, 90, "m0"),
                    Checkpoint(group, "A.orders", 1, 7, 7),
                    Checkpoint(group, "A.orders", 0, 120, 110, "m1"),
                )
            ]
        )
    finally:
        writer.close()

    result = _translate(mm2_properties, "--source", "A", "--target", "B", "--group", group)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "source": "A",
        "target": "B",
        "group": group,
        "checkpoints_topic": "A.checkpoints.internal",
        "offsets": [
            {"topic": "A.orders", "partition": 0, "offset": 110, "upstream_offset": 120, "metadata": "m1"},
            {"topic": "A.orders", "partition": 1, "offset": 7, "upstream_offset": 7, "metadata": ""},
        ],
    }


def test_unknown_cluster_alias_is_a_clear_error(mm2_properties):
    result = _translate(mm2_properties, "--source", "C", "--target", "B", "--group", "g")
    assert result.returncode != 0
    assert "unknown cluster alias 'C'" in result.stderr and "known: A, B" in result.stderr
