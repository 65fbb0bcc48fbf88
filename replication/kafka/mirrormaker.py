"""Apache Kafka's own MirrorMaker 2 (connect-mirror, dedicated mode) as a child process, for the interop
tests and the side-by-side benchmark (`python -m bench vs-mm2`).

Its jars are the brokers' (`deploy/kafka/pom.xml` brings connect-mirror and the log4j2 binding); its log
goes to `mm2.log` in its folder, shown when a test fails.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from replication.kafka.apache import LOG4J2, kafka_libs
from replication.kafka.processes import die_with_parent

# The JVM options Apache Kafka's bin/connect-mirror-maker.sh runs MM2 with (its heap, and
# kafka-run-class.sh's performance options): MM2 as its users start it, for the benchmark.
SCRIPT_JVM_OPTIONS = (
    "-Xms256M",
    "-Xmx2G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)

# Settings for single-node test clusters: every internal topic at replication factor 1, short intervals.
TEST_SETTINGS = {
    "replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "config.storage.replication.factor": "1",
    "refresh.topics.interval.seconds": "2",
    "refresh.groups.interval.seconds": "2",
    "emit.checkpoints.interval.seconds": "2",
    "sync.topic.acls.enabled": "false",
}


class MirrorMaker2:
    """`org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`; `properties` are the file's lines
    (clusters, flows) over TEST_SETTINGS."""

    def __init__(
        self, workdir: Path, properties: Mapping[str, str], *, jvm_options: Sequence[str] = ("-Xmx512m",)
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.properties_path = workdir / "mm2.properties"
        self.properties_path.write_text(
            "".join(f"{key} = {value}\n" for key, value in {**TEST_SETTINGS, **properties}.items())
        )
        (workdir / "log4j2.properties").write_text(LOG4J2)
        self.log_path = workdir / "mm2.log"
        self.jvm_options = tuple(jvm_options)
        self.process: subprocess.Popen | None = None

    def start(self) -> MirrorMaker2:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    shutil.which("java") or "java",
                    *self.jvm_options,
                    f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                    "-cp",
                    str(kafka_libs() / "*"),
                    "org.apache.kafka.connect.mirror.MirrorMaker",
                    str(self.properties_path),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, *, kill: bool = False, timeout_s: float = 60.0) -> int | None:
        """SIGTERM (MM2's own shutdown: tasks stop, Connect commits their offsets), then SIGKILL; `kill`:
        SIGKILL at once (a crash: records copied after the last commit stay uncommitted)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        return self.process.returncode

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def mm2_translate_offsets(
    bootstrap_servers: str, *, source_alias: str, group: str
) -> dict[tuple[str, int], int]:
    """`RemoteClusterUtils.translateOffsets` (java/TranslateOffsets.java beside this module, run by the JDK's source
    launcher) on the cluster holding `<source_alias>.checkpoints.internal`: {(remote topic, partition): offset}."""
    workdir = Path(__file__).resolve().parent / "java"
    result = subprocess.run(
        [
            shutil.which("java") or "java",
            "-Dlog4j2.level=WARN",
            "-cp",
            str(kafka_libs() / "*"),
            str(workdir / "TranslateOffsets.java"),
            bootstrap_servers,
            source_alias,
            group,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"TranslateOffsets failed: {result.stdout[-2000:]}{result.stderr[-3000:]}")
    lines = (re.fullmatch(r"(\S+) (\d+) (-?\d+)", line) for line in result.stdout.splitlines())
    return {(m.group(1), int(m.group(2))): int(m.group(3)) for m in lines if m}
