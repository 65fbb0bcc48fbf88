"""`python -m replication validate FILE` as an operator runs it (a real subprocess, no Kafka needed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_validate(path: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replication", "validate", str(path)],
        cwd=REPO,
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_validate_lists_clusters_and_flows(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        textwrap.dedent(
            """\
            clusters = A, B
            A.bootstrap.servers = a:9092
            B.bootstrap.servers = b:9092
            B.sasl.jaas.config = PlainLoginModule required password="${env:B_PASSWORD}";
            A->B.enabled = true
            A->B.topics = orders.*
            B->A.enabled = false
            topics.blacklist = __.*
            """
        ),
        encoding="utf-8",
    )
    result = run_validate(path, B_PASSWORD="hunter2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Flows (2, 1 enabled):" in out
    assert "  A->B: enabled" in out
    assert "  B->A: disabled" in out
    assert re.search(r"\n    topics +\= orders\.\*\n", out)
    assert "sasl.jaas.config = ******" in out
    assert "hunter2" not in out + result.stderr
    assert "topics.blacklist is deprecated; use topics.exclude" in result.stderr


def test_validate_exits_2_with_line_numbered_errors(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\nA->B.topics.exclude = *.internal,__.*\nA->B.tasks.max = lots\n",
        encoding="utf-8",
    )
    result = run_validate(path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"error: {path}: 2 errors:" in result.stderr
    assert (
        f"{path} line 5: A->B.topics.exclude: '*.internal' is not a valid regular expression: nothing to repeat "
        "at position 0. Fix: a leading '*' repeats nothing; did you mean '.*\\.internal'?"
    ) in result.stderr
    assert f"{path} line 6: A->B.tasks.max: 'lots' is not a whole number" in result.stderr


def test_validate_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_validate(tmp_path / "absent.properties")
    assert result.returncode == 2
    assert "absent.properties" in result.stderr


def test_validate_refuses_an_unknown_security_protocol_and_reports_worker_properties(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\nB.status.storage.replication.factor = 1\nA.security.protocol = abc\n",
        encoding="utf-8",
    )
    result = run_validate(path)
    assert result.returncode == 2
    assert (
        f"{path} line 6: A.security.protocol: 'abc' is not a valid security.protocol. Fix: set "
        "security.protocol to one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
    ) in result.stderr

    path.write_text(path.read_text().replace("= abc", "= SSL"), encoding="utf-8")
    result = run_validate(path)
    assert result.returncode == 0, result.stderr
    assert (
        "B.status.storage.replication.factor: a Kafka Connect worker property, not applicable"
        in result.stderr
    )
    assert "status.storage" not in result.stdout
