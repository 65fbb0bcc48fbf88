"""`make demo`'s supervisor: `python -m workers.procfile Procfile.demo`.

Starts the Procfile's processes in the file's order and, on Ctrl-C (or when one of them exits on its
own), stops them in the reverse order, each with its own grace period: the traffic first, then beat, the
workers (they hand their chains over while Kafka still answers), the web, and Kafka last. honcho stopped
them all at once and killed what had not exited after 5 s: workers lost their hand-over to a vanished
broker (hundreds of ERROR lines) and were SIGKILLed, leaving messages in Redis.

Each process runs in a session of its own (Ctrl-C reaches only this supervisor, which decides the
order). Its whole output goes to `var/demo/logs/<name>.log`; the console shows each line prefixed with
the process's name until the setup process has printed its banner (BANNER), then only errors (and the
setup's own lines), so the banner with the URL and the login stays in view. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replication.stop_signals import exit_status, stop_on_signals

LOG_DIR = Path("var/demo/logs")
# Seconds from SIGTERM to SIGKILL per process; a Celery worker's warm shutdown finishes its slice and
# hands its chains over, Kafka flushes its logs.
GRACE_S = {"worker": 45.0, "metadata": 45.0, "kafka": 30.0}
DEFAULT_GRACE_S = 15.0
BANNER_FROM = "setup"  # whose output is always shown; the console goes quiet once it printed BANNER
BANNER = "Mirrorplane demo is running"
# A process the next ones wait for until it prints this line (or READY_TIMEOUT_S passed): the workers
# started before Apache Kafka answered (`make demo KAFKA=apache`) logged ~300 connection errors and
# faulted the demo flows.
READY_WHEN = {"kafka": "Kafka running"}
READY_TIMEOUT_S = 180.0
# What the console still shows after the banner (warnings are in the logs).
_NOTABLE = re.compile(r"\b(ERROR|CRITICAL|FATAL|Traceback)\b")


@dataclass(frozen=True)
class Entry:
    name: str
    command: str


def read_procfile(text: str) -> list[Entry]:
    """`name: command` lines in order; blank lines and `#` comments skipped."""
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, separator, command = line.partition(":")
        if not separator or not re.fullmatch(r"[A-Za-z0-9_-]+", name.strip()) or not command.strip():
            raise ValueError(f"Procfile line {number}: write 'name: command' (got {line!r})")
        entries.append(Entry(name.strip(), command.strip()))
    return entries


class Console:
    """Prefixed lines on stdout, one writer at a time; quiet (notable lines only) after the banner."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.quiet = False
        self._lock = threading.Lock()

    def say(self, name: str, line: str) -> None:
        with self._lock:
            sys.stdout.write(f"{name:<{self.width}} | {line}\n")
            sys.stdout.flush()

    def show(self, name: str, line: str) -> None:
        if name == BANNER_FROM:
            self.say(name, line)
            self.quiet = self.quiet or BANNER in line
        elif not self.quiet or _NOTABLE.search(line):
            self.say(name, line)


class Child:
    """One Procfile process in a session of its own; its output pumped to its log and the console."""

    def __init__(self, entry: Entry, console: Console) -> None:
        self.entry = entry
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"{entry.name}.log"
        self.process = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {entry.command}"],  # the shell expands ${VAR:-default}
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._marker = READY_WHEN.get(entry.name)
        self.ready = threading.Event()
        if self._marker is None:
            self.ready.set()
        self._pump = threading.Thread(target=self._copy_output, args=(console,), daemon=True)
        self._pump.start()

    def wait_ready(self, stopping: threading.Event, console: Console) -> bool:
        """Wait until it printed its READY_WHEN line; False when it exited or a stop was asked first."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready.wait(0.2):
            if stopping.is_set() or not self.running():
                return False
            if time.monotonic() > deadline:
                console.say(
                    "demo", f"{self.entry.name} not ready after {READY_TIMEOUT_S:.0f} s: starting the rest"
                )
                return True
        return True

    def _copy_output(self, console: Console) -> None:
        assert self.process.stdout is not None
        with self.log_path.open("ab") as log:
            for raw in self.process.stdout:
                log.write(raw)
                log.flush()
                line = raw.decode(errors="replace").rstrip("\n")
                if self._marker is not None and self._marker in line:
                    self.ready.set()
                console.show(self.entry.name, line)

    def running(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> float:
        """SIGTERM to the process (a workers.respawn wrapper passes it on once: a second SIGTERM could
        turn a Celery worker's warm shutdown cold); the monotonic time by which it must have exited."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        return time.monotonic() + GRACE_S.get(self.entry.name, DEFAULT_GRACE_S)

    def wait_or_kill(self, deadline: float, console: Console, *, started: float) -> None:
        """Until it exited or `deadline`; then SIGKILL to its whole group."""
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
            console.say("demo", f"{self.entry.name} stopped ({time.monotonic() - started:.1f} s)")
        except subprocess.TimeoutExpired:
            console.say(
                "demo",
                f"{self.entry.name} did not stop in {deadline - started:.0f} s: killed (see {self.log_path})",
            )
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._pump.join(5)


def stop_stages(children: Sequence[Child]) -> list[list[Child]]:
    """The reverse of the start order; neighbouring Celery workers stop together (they do not need each
    other, and each may take its grace period to finish its tasks)."""
    stages: list[list[Child]] = []
    for child in reversed(children):
        is_worker = " worker " in child.entry.command
        if stages and is_worker and all(" worker " in c.entry.command for c in stages[-1]):
            stages[-1].append(child)
        else:
            stages.append([child])
    return stages


def stop(children: Sequence[Child], console: Console) -> None:
    stages = stop_stages(children)
    console.say(
        "demo", "stopping in order: " + ", then ".join(" and ".join(c.entry.name for c in s) for s in stages)
    )
    for stage in stages:
        running = [child for child in stage if child.running()]
        started = time.monotonic()
        deadlines = [child.terminate() for child in running]
        for child, deadline in zip(running, deadlines, strict=True):
            child.wait_or_kill(deadline, console, started=started)


def run(entries: Sequence[Entry]) -> int:
    """Run `entries` until SIGINT/SIGTERM (exit 130/143) or until one exits on its own (its code)."""
    console = Console(width=max([len(e.name) for e in entries] + [len("demo")]))
    stopping = threading.Event()
    signals = stop_on_signals(stopping)
    children: list[Child] = []
    failed: Child | None = None
    try:
        for entry in entries:
            children.append(Child(entry, console))
            if not children[-1].wait_ready(stopping, console):
                break  # it exited (the loop below says so) or Ctrl-C came first
        console.say("demo", f"started {', '.join(e.name for e in entries)}; full logs in {LOG_DIR}/")
        while not stopping.wait(0.5):
            failed = next((child for child in children if not child.running()), None)
            if failed is not None:
                console.say(
                    "demo",
                    f"{failed.entry.name} exited with code {failed.process.returncode}: stopping everything "
                    f"(its log: {failed.log_path})",
                )
                break
    finally:
        console.quiet = False
        stop(children, console)
        signals.restore()
    if signals.received:
        return 128 + signals.received[0]
    return (exit_status(failed.process.returncode) or 1) if failed is not None else 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m workers.procfile PROCFILE", file=sys.stderr)
        return 2
    try:
        entries = read_procfile(Path(args[0]).read_text())
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(entries)


if __name__ == "__main__":
    raise SystemExit(main())
