"""Keep one process running: `python -m workers.respawn COMMAND [ARG...]`.

COMMAND is started again whenever it exits on its own (a crash, an unrecoverable error, a kill -9), after
a pause that doubles with each quick failure (1 s up to 30 s; a run of a minute or more resets it), so a
process that cannot start does not spin. SIGTERM or SIGINT is passed on to COMMAND and ends the wrapper
once COMMAND exited, with COMMAND's exit status (128 + N when signal N killed it, as a shell says):
Ctrl-C under `make demo` still stops everything cleanly.

`make demo` runs its workers and beat through it (workers.procfile restarts nothing). In production the platform's
supervisor does this job (compose `restart: unless-stopped`, systemd `Restart=always`: docs/operations.md).
Standard library only (replication.stop_signals is too), so it starts even when the application cannot.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from replication.stop_signals import exit_status, stop_on_signals

log = logging.getLogger("workers.respawn")

BASE_DELAY_S = 1.0
MAX_DELAY_S = 30.0
STABLE_RUN_S = 60.0


def restart_delay_s(
    *, quick_failures: int, base_s: float = BASE_DELAY_S, cap_s: float = MAX_DELAY_S
) -> float:
    """Pause before the next start after `quick_failures` consecutive short runs (>= 1)."""
    return min(base_s * 2 ** max(quick_failures - 1, 0), cap_s)


def run(command: Sequence[str], *, stable_run_s: float = STABLE_RUN_S) -> int:
    """Run `command` until SIGTERM/SIGINT; COMMAND's last exit status (`exit_status`)."""
    stopping = threading.Event()
    child: subprocess.Popen | None = None

    def forward(signum: int) -> None:  # once `stopping` is set: its exit is then not taken for a crash
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    stop_on_signals(stopping, on_signal=forward)
    quick_failures = 0
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command)
        code = exit_status(child.wait())
        if stopping.is_set():
            return code
        ran_s = time.monotonic() - started
        quick_failures = 0 if ran_s >= stable_run_s else quick_failures + 1
        delay_s = restart_delay_s(quick_failures=max(quick_failures, 1))
        log.error(
            "%s exited with code %s after %.0f s; starting it again in %g s", command[0], code, ran_s, delay_s
        )
        if stopping.wait(delay_s):
            return code


def main(argv: Sequence[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python -m workers.respawn COMMAND [ARG...]", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(command)


if __name__ == "__main__":
    sys.exit(main())
