"""What the broker launchers share: free loopback ports and children that die with their parent."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
