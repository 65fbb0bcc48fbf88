"""CPU and memory of a benchmark's processes, from /proc (Linux): what `top` shows, without psutil."""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """utime + stime of a process and its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the most resident memory the process had so far."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a gunicorn master's workers)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


def renice(pid: int, niceness: int) -> int:
    """Set the nice value of every thread of process `pid` and of its descendants to `niceness` (Linux
    keeps a nice value per thread; a thread started later takes its creator's). The threads set."""
    count = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(task.name), niceness)
            count += 1
        except ProcessLookupError:  # the thread ended meanwhile
            continue
    for child in child_pids(pid):
        count += renice(child, niceness)
    return count
