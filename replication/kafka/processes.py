"""What the broker launchers share: free loopback ports and children that die with their parent."""

from __future__ import annotations

import ctypes
import random
import signal
import socket
import subprocess
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_LISTEN_PORT = 16384  # above the well-known ports our own services use (5432, 6379, 8000, 9092...)


def free_port() -> int:
    """A loopback port nothing is bound to, below the kernel's ephemeral range: the kernel never gives
    such a port to an outgoing connection, so a client cannot take it before the server binds it, nor
    connect to itself on it (TCP self-connect) while the server is down and a test restarts it there."""
    first_ephemeral = _first_ephemeral_port()
    for _ in range(200):
        port = random.randrange(_LOWEST_LISTEN_PORT, first_ephemeral)
        if _bindable(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a crowded range: any free port
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _first_ephemeral_port() -> int:
    try:
        first = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768  # Linux's default
    return max(first, _LOWEST_LISTEN_PORT + 1024)


def _bindable(port: int) -> bool:
    """Whether nothing holds `port` on any address (no SO_REUSEADDR: a port in TIME_WAIT is not free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def die_with_parent() -> None:
    """preexec_fn of a child process: the kernel kills it when the process that started it exits."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def stop_child(process: subprocess.Popen | None, *, kill: bool, grace_s: float) -> None:
    """SIGTERM (or SIGKILL with `kill`) and wait up to `grace_s`, then SIGKILL; nothing if it has exited."""
    if process is None or process.poll() is not None:
        return
    if kill:
        process.kill()
    else:
        process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
