"""SIGINT/SIGTERM set a `threading.Event` without risking a deadlock (`stop_on_signals`).

A Python signal handler runs in the main thread between two bytecodes, possibly while that thread holds a
lock. `threading.Event.wait` holds the event's lock (not reentrant) around its check, so a handler that
calls `event.set()` there waits forever for a lock its own thread holds: `replication run` once hung after
SIGTERM that way, its tasks still replicating. The handler here takes no lock: it writes the signal's number
to a pipe, and a thread of its own sets the event, then runs `on_signal` (a log line, a signal passed on to a child).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Sequence

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_status(returncode: int) -> int:
    """A child's exit as a shell reports it: 128 + N when signal N killed it (Popen's returncode -N, which
    `sys.exit` would turn into 256 - N), else its own code."""
    return 128 - returncode if returncode < 0 else returncode


class SignalWatcher:
    """The installed handlers: `received` lists the signals in order; `restore()` puts back the previous
    handlers (the event stays as it is)."""

    def __init__(
        self,
        event: threading.Event,
        *,
        on_signal: Callable[[int], None] | None,
        signals: Sequence[signal.Signals],
    ) -> None:
        self.event = event
        self.received: list[int] = []
        self._on_signal = on_signal
        self._read_fd, self._write_fd = os.pipe()
        self._restored = False
        os.set_blocking(self._write_fd, False)  # a handler never blocks, even on a full pipe
        self._thread = threading.Thread(target=self._watch, name="stop-signals", daemon=True)
        self._thread.start()
        self._previous = {signum: signal.signal(signum, self._handle) for signum in signals}

    def _handle(self, signum: int, _frame: object) -> None:
        if self._restored:  # the main thread ran restore(): the descriptor may be another file's now
            return
        with contextlib.suppress(BlockingIOError):  # a full pipe: the event is on its way anyway
            os.write(self._write_fd, bytes([signum]))

    def _watch(self) -> None:
        while data := os.read(self._read_fd, 64):  # b"" once restore() closes the write end
            for signum in data:
                self.received.append(signum)
                self.event.set()
                if self._on_signal is not None:
                    self._on_signal(signum)
        os.close(self._read_fd)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._restored = True
        os.close(self._write_fd)
        self._thread.join(5)


def stop_on_signals(
    event: threading.Event,
    *,
    on_signal: Callable[[int], None] | None = None,
    signals: Sequence[signal.Signals] = STOP_SIGNALS,
) -> SignalWatcher:
    """Set `event` when one of `signals` arrives (from the main thread only, as `signal.signal`)."""
    return SignalWatcher(event, on_signal=on_signal, signals=signals)
