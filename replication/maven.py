"""Jars from Maven Central through one of the project's own build files (`deploy/<name>/pom.xml`): Apache
Kafka for the tests and the benchmarks, Spark's s3a connector for report jobs on an object-store lake.

`maven_libs` copies a pom's runtime dependencies into a folder once (a `.complete` marker says the copy
finished); Maven's own cache (~/.m2) keeps a second copy from fetching anything.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)


class MavenError(RuntimeError):
    pass


def pom_property(pom: Path, name: str) -> str:
    """A `<properties>` value of `pom`, its one home (a version, say)."""
    match = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    if not match:
        raise MavenError(f"{pom} names no <{name}>")
    return match.group(1)


def maven_libs(pom: Path, libs: Path, *, what: str) -> Path:
    """`libs`, holding the runtime jars `pom` names, fetched from Maven Central on first use.

    `what` names them in the log and in the error when Maven is missing or fails."""
    done = libs / ".complete"
    if done.exists():
        return libs
    maven = shutil.which("mvn")
    if maven is None:
        raise MavenError(f"Maven (mvn) is needed to fetch {what} from Maven Central")
    log.info("fetching %s from Maven Central into %s", what, libs)
    result = subprocess.run(
        [
            maven,
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={libs}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise MavenError(
            f"fetching {what} from Maven Central failed:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
        )
    done.touch()
    return libs
