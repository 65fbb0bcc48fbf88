"""stop_on_signals: SIGTERM sets the stop event whatever the main thread is doing, including holding the
event's own lock in `wait` (where a handler calling `event.set()` deadlocks: `replication run` hung so)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

from harness.runtime import REPO
from replication.stop_signals import stop_on_signals

# Each round: a thread sends SIGTERM a moment later while the main thread spins in `event.wait(0)`, which
# holds the event's lock most of the time. A handler that took the lock hung in about 4 rounds of 10.
ROUNDS = 60
SPIN_UNTIL_STOPPED = textwrap.dedent(
    f"""
    import os, signal, threading, time
    from replication.stop_signals import stop_on_signals

    for round in range({ROUNDS}):
        stop = threading.Event()
        watcher = stop_on_signals(stop)
        threading.Timer(0.002, os.kill, (os.getpid(), signal.SIGTERM)).start()
        while not stop.wait(0):
            pass
        watcher.restore()
        assert watcher.received == [signal.SIGTERM], watcher.received
    print("stopped every round", flush=True)
    """
)


def test_sigterm_stops_a_main_thread_that_holds_the_events_lock_every_time():
    result = subprocess.run(
        [sys.executable, "-c", SPIN_UNTIL_STOPPED],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,  # a deadlock: TimeoutExpired fails the test
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "stopped every round" in result.stdout


def test_the_signals_are_recorded_in_order_the_callback_runs_after_the_event_and_restore_undoes_it():
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR1, signal.SIGTERM)}
    stop = threading.Event()
    seen: list[tuple[int, bool]] = []
    watcher = stop_on_signals(
        stop, on_signal=lambda signum: seen.append((signum, stop.is_set())), signals=(signal.SIGUSR1,)
    )
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop.wait(10)
    finally:
        watcher.restore()
    assert watcher.received == [signal.SIGUSR1]
    assert seen == [(signal.SIGUSR1, True)]
    # restored, and only the signals asked for were ever taken
    assert {signum: signal.getsignal(signum) for signum in previous} == previous
