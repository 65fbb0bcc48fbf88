"""Apicurio Registry on loopback, a real Confluent-compatible schema registry for the tests (one per Kafka
cluster) and the benchmarks.

The application comes from Maven Central through `deploy/schema-registry/pom.xml`: Apicurio publishes the
whole Quarkus application as the `all` tar.gz of `apicurio-registry-app`, fetched once and unpacked into
`var/schema-registry/<version>/app` (`replication.maven`; `~/.m2` keeps a second fetch local). Each
registry is one JVM with in-memory storage (its schemas live as long as it runs), started as a child that
dies with its parent, ready once its Confluent API (`/apis/ccompat/v7`) answers, stopped by SIGTERM.
Its log is `registry.log` in its folder.

What this registry does not do, which the tests rely on knowing: no IMPORT mode and no registering under
a given ID (2.6 answers the mode API with "Operation not supported" and ignores an `id` in a registration),
so `keep-ids` cannot target it; IDs are its content IDs (the same schema under two subjects: one ID).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from replication.kafka.processes import die_with_parent, free_port, stop_child
from replication.maven import MavenError, maven_libs, pom_property

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
POM = PROJECT_ROOT / "deploy" / "schema-registry" / "pom.xml"
READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 20.0
# A registry serves a test's few requests: a small heap, the serial collector (ready in 4-6 s here, two
# side by side in about 6 s).
JVM_OPTIONS = ["-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
CONFLUENT_API = "/apis/ccompat/v7"


class SchemaRegistryError(RuntimeError):
    pass


def apicurio_version() -> str:
    """The Apicurio Registry version deploy/schema-registry/pom.xml names (its one home)."""
    return pom_property(POM, "apicurio.version")


def apicurio_app() -> Path:
    """The unpacked application (holding `quarkus-run.jar` or the 2.x `*-runner.jar`), fetched on first use.

    MIRRORPLANE_SCHEMA_REGISTRY_APP points at another unpacked copy."""
    override = os.environ.get("MIRRORPLANE_SCHEMA_REGISTRY_APP")
    if override:
        return Path(override)
    version = apicurio_version()
    home = PROJECT_ROOT / "var" / "schema-registry" / version
    app = home / "app"
    if (app / ".complete").exists():
        return app
    download = maven_libs(POM, home / "download", what=f"Apicurio Registry {version}")
    archives = sorted(download.glob("apicurio-registry-app-*-all.tar.gz"))
    if not archives:
        raise MavenError(f"{download} holds no apicurio-registry-app archive")
    unpacking = Path(tempfile.mkdtemp(prefix="app-", dir=home))
    with tarfile.open(archives[0]) as archive:
        archive.extractall(unpacking, filter="data")
    shutil.rmtree(app, ignore_errors=True)
    unpacking.rename(app)
    (app / ".complete").touch()
    archives[0].unlink()  # unpacked, and still in Maven's cache: no third copy on disk
    return app


def _launcher(app: Path) -> Path:
    for candidate in (app / "quarkus-run.jar", *sorted(app.glob("*-runner.jar"))):
        if candidate.exists():
            return candidate
    raise SchemaRegistryError(f"{app} holds no quarkus-run.jar nor *-runner.jar")


@dataclass
class ApicurioRegistry:
    """One registry; `url` (its Confluent API) is valid once `start()` returns."""

    name: str
    port: int = 0
    workdir: Path | None = None
    jvm_options: list[str] = field(default_factory=lambda: list(JVM_OPTIONS))
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CONFLUENT_API}"

    @property
    def log_path(self) -> Path:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"schema-registry-{self.name}-"))
        return self.workdir / "registry.log"

    def launch(self) -> ApicurioRegistry:
        """Start the JVM without waiting for it (`wait_ready` does): two registries boot side by side."""
        if self.process is not None:
            return self
        self.port = self.port or free_port()
        command = [
            shutil.which("java") or "java",
            *self.jvm_options,
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.http.host=127.0.0.1",
            "-Dquarkus.management.enabled=false",
            "-jar",
            str(_launcher(apicurio_app())),
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        _RUNNING.add(self)
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise SchemaRegistryError(
                    f"schema registry {self.name} exited with {self.process and self.process.returncode}; "
                    f"see {self.log_path}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                    if response.status == 200:
                        log.info("Apicurio Registry %s ready at %s", self.name, self.url)
                        return
            except (urllib.error.URLError, OSError) as exc:
                last_error = exc
            time.sleep(0.2)
        raise SchemaRegistryError(
            f"schema registry {self.name} did not answer on {self.url} within {timeout_s}s ({last_error}); "
            f"see {self.log_path}"
        )

    def start(self) -> ApicurioRegistry:
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        process, self.process = self.process, None
        _RUNNING.discard(self)
        stop_child(process, kill=False, grace_s=STOP_GRACE_S)

    def __hash__(self) -> int:
        return id(self)


_RUNNING: set[ApicurioRegistry] = set()


@atexit.register
def _stop_all() -> None:
    for registry in list(_RUNNING):
        registry.stop()


@contextlib.contextmanager
def apicurio_registries(
    names: Sequence[str], *, workdir: Path | None = None
) -> Iterator[dict[str, ApicurioRegistry]]:
    """One registry per name (a cluster alias, say), started side by side, stopped on exit."""
    registries = {
        name: ApicurioRegistry(name=name, workdir=(workdir / name) if workdir else None) for name in names
    }
    try:
        for registry in registries.values():
            registry.launch()
        for registry in registries.values():
            registry.wait_ready()
        yield registries
    finally:
        for registry in registries.values():
            registry.stop()
