"""`make demo`'s supervisor (workers.procfile) on real child processes: the reverse stop order with the
Celery workers stopped together, a process that ignores SIGTERM killed after its grace period, a process
that exits on its own stopping everything, and the console going quiet after the banner."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from workers import procfile

ROOT = Path(__file__).resolve().parents[2]

# A child that says it is up, records when SIGTERM reached it, and exits (or ignores SIGTERM: STUBBORN).
CHILD = """
import signal, sys, time
name, journal, stubborn = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def on_term(*_):
    with open(journal, "a") as f:
        f.write(f"{name} {time.monotonic()}\\n")
    if not stubborn:
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(journal + "." + name + ".up", "w").close()
print(f"{name} says WARNING something", flush=True)
print("Kafka running" if name == "kafka" else "up", flush=True)
while True:
    time.sleep(0.05)
"""


def _entry(name: str, journal: Path, *, stubborn: bool = False, worker: bool = False) -> procfile.Entry:
    script = journal.parent / "child.py"
    script.write_text(CHILD)
    # " worker " in the command marks a Celery worker for the stop stages, as in Procfile.demo.
    tag = " worker " if worker else " "
    return procfile.Entry(name, f"{sys.executable} {script} {name} {journal} {int(stubborn)} #{tag}")


def _interrupt_when_up(journal: Path, names: list[str]) -> threading.Thread:
    def interrupt() -> None:
        deadline = time.monotonic() + 30
        while not all(Path(f"{journal}.{name}.up").exists() for name in names):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C reaches the supervisor only

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    return thread


def test_ctrl_c_stops_in_reverse_order_workers_together_and_kills_what_ignores_sigterm(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(procfile, "GRACE_S", {"stubborn": 1.0})
    journal = tmp_path / "journal"
    entries = [
        _entry("kafka", journal),
        _entry("web", journal),
        _entry("stubborn", journal, stubborn=True),
        _entry("worker", journal, worker=True),
        _entry("metadata", journal, worker=True),
        _entry("setup", journal),
    ]
    _interrupt_when_up(journal, [e.name for e in entries])
    assert procfile.run(entries) == 128 + signal.SIGINT

    order = [line.split()[0] for line in journal.read_text().splitlines()]
    assert order[0] == "setup" and set(order[1:3]) == {"metadata", "worker"}
    assert order[3:] == ["stubborn", "web", "kafka"]  # web waited for the stubborn one's grace period
    out = capsys.readouterr().out
    assert "stopping in order: setup, then metadata and worker, then stubborn, then web, then kafka" in out
    assert "stubborn did not stop in 1 s: killed" in out
    assert (tmp_path / procfile.LOG_DIR / "web.log").read_text().startswith("web says WARNING")


def test_a_process_that_exits_on_its_own_stops_everything_with_its_code(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / "journal"
    failing = tmp_path / "failing.py"  # exits with 3 once kafka is up (and so handles SIGTERM)
    failing.write_text(
        "import os, sys, time\n"
        f"while not os.path.exists({str(journal) + '.kafka.up'!r}):\n    time.sleep(0.05)\n"
        "sys.exit(3)\n"
    )
    entries = [_entry("kafka", journal), procfile.Entry("web", f"{sys.executable} {failing}")]
    assert procfile.run(entries) == 3
    assert [line.split()[0] for line in journal.read_text().splitlines()] == ["kafka"]
    assert "web exited with code 3: stopping everything" in capsys.readouterr().out


def test_a_process_killed_by_a_signal_stops_everything_with_the_shells_status(tmp_path, monkeypatch, capsys):
    """128 + 9 for a kill -9, as a shell reports it (Popen's -9 passed to sys.exit would be 247)."""
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / "journal"
    killed = tmp_path / "killed.py"  # kills itself with SIGKILL once kafka is up
    killed.write_text(
        "import os, signal, time\n"
        f"while not os.path.exists({str(journal) + '.kafka.up'!r}):\n    time.sleep(0.05)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    entries = [_entry("kafka", journal), procfile.Entry("web", f"{sys.executable} {killed}")]
    assert procfile.run(entries) == 128 + signal.SIGKILL
    assert "web exited with code -9: stopping everything" in capsys.readouterr().out


def test_after_the_banner_the_console_shows_only_errors_and_the_setups_lines(capsys):
    console = procfile.Console(width=8)
    console.show("worker", "2026 WARNING before the banner")
    console.show("setup", f"{procfile.BANNER}: web http://...")
    console.show("worker", "2026 WARNING replication factor")
    console.show("metadata", "2026 ERROR a report failed")
    console.show("setup", "  login demo")
    out = capsys.readouterr().out
    assert "before the banner" in out and "a report failed" in out and "login demo" in out
    assert "replication factor" not in out


def test_the_processes_after_kafka_start_once_it_says_it_runs(tmp_path, monkeypatch):
    """`make demo KAFKA=apache`: the brokers take seconds to start, and workers started before them logged
    hundreds of connection errors and faulted the demo flows."""
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / "journal"
    said = tmp_path / "kafka.said"
    slow = tmp_path / "slow_kafka.py"
    slow.write_text(
        "import time\n"
        f"time.sleep(1.5)\nopen({str(said)!r}, 'w').write(repr(time.time()))\n"
        "print('Kafka running; Ctrl-C stops it', flush=True)\ntime.sleep(60)\n"
    )
    entries = [procfile.Entry("kafka", f"{sys.executable} {slow}"), _entry("web", journal)]
    _interrupt_when_up(journal, ["web"])
    assert procfile.run(entries) == 128 + signal.SIGINT
    assert Path(f"{journal}.web.up").stat().st_mtime >= float(said.read_text())


def test_the_demo_procfile_starts_kafka_first_and_stops_the_two_workers_together():
    entries = procfile.read_procfile((ROOT / "Procfile.demo").read_text())
    assert [e.name for e in entries][0] == "kafka" and entries[-1].name == "setup"
    children = [type("C", (), {"entry": e})() for e in entries]
    stages = [[c.entry.name for c in stage] for stage in procfile.stop_stages(children)]
    assert stages == [["setup"], ["beat"], ["metadata", "worker"], ["web"], ["kafka"]]
    with pytest.raises(ValueError, match="line 1"):
        procfile.read_procfile("not a procfile line\n")
