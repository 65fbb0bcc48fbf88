"""bench.processes.renice: `bench scale --background-nice` puts the brokers and the load behind the tools,
every thread of them and of their children."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench.processes import child_pids, renice

# A process with a second thread, and a child process with one of its own, all sleeping.
SCRIPT = textwrap.dedent(
    """
    import subprocess, sys, threading, time
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    if len(sys.argv) == 1:
        subprocess.Popen([sys.executable, __file__, "child"])
    print("ready", flush=True)
    time.sleep(60)
    """
)


def _nice_values(pid: int) -> list[int]:
    values = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        values.append(int((task / "stat").read_text().rpartition(")")[2].split()[16]))
    for child in child_pids(pid):
        values += _nice_values(child)
    return values


def test_renice_sets_every_thread_of_a_process_and_its_children(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while len(_nice_values(process.pid)) < 4:  # the child and its thread start
            assert time.monotonic() < deadline, _nice_values(process.pid)
            time.sleep(0.05)
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert set(_nice_values(process.pid)) == {ours}
        niceness = min(ours + 7, 19)
        assert renice(process.pid, niceness) == 4
        assert _nice_values(process.pid) == [niceness] * 4
    finally:
        for child in child_pids(process.pid):
            subprocess.run(["kill", str(child)], check=False)
        process.kill()
        process.wait()
