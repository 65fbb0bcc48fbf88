"""workers.respawn, the restart wrapper `make demo` runs its workers and beat under, as a real process."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

from harness.runtime import REPO, wait_until
from workers.respawn import MAX_DELAY_S, restart_delay_s


def test_restart_delay_doubles_up_to_its_cap():
    assert [restart_delay_s(quick_failures=n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert restart_delay_s(quick_failures=50) == MAX_DELAY_S


def _wrapper(tmp_path, script: str) -> subprocess.Popen:
    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent(script))
    with (tmp_path / "wrapper.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "workers.respawn", sys.executable, str(child), str(tmp_path)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _logged(tmp_path) -> str:
    return (tmp_path / "wrapper.log").read_text()


CRASHING = """
    import pathlib, sys
    runs = pathlib.Path(sys.argv[1]) / "runs"
    with runs.open("a") as f:
        f.write("run\\n")
    sys.exit(1)
"""

SERVING = """
    import pathlib, signal, sys, time
    out = pathlib.Path(sys.argv[1])
    def stop(signum, frame):
        (out / "stopped").write_text(str(signum))
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with (out / "runs").open("a") as f:
        f.write("run\\n")
    while True:
        time.sleep(0.1)
"""


def _runs(tmp_path) -> int:
    path = tmp_path / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_crashing_process_is_started_again_until_sigterm(tmp_path):
    wrapper = _wrapper(tmp_path, CRASHING)
    try:
        # Three crashes logged: the SIGTERM comes in the 4 s pause before the fourth start, not while a
        # child runs (CI once sent it as the third child was exiting: the child died of it instead).
        wait_until(
            lambda: _logged(tmp_path).count("exited with code 1") >= 3,
            timeout_s=30,
            what="three crashes of the child, each followed by a pause",
        )
        assert _runs(tmp_path) == 3 and wrapper.poll() is None
    finally:
        wrapper.send_signal(signal.SIGTERM)
        code = wrapper.wait(10)
    assert code == 1  # the child's last exit code


def test_a_child_killed_by_the_forwarded_signal_gives_the_shells_status(tmp_path):
    """A child with no handler for SIGTERM dies of it: the wrapper exits 128 + 15, as a shell reports it
    (Popen's -15 passed to sys.exit would be 241)."""
    wrapper = _wrapper(tmp_path, CRASHING.replace("sys.exit(1)", "import time; time.sleep(60)"))
    wait_until(lambda: _runs(tmp_path) == 1, timeout_s=30, what="the child running")
    wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(10) == 128 + signal.SIGTERM
    assert _runs(tmp_path) == 1


def test_sigterm_stops_the_child_cleanly_and_is_not_restarted(tmp_path):
    wrapper = _wrapper(tmp_path, SERVING)
    wait_until(lambda: _runs(tmp_path) == 1, timeout_s=30, what="the child running")
    wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(10) == 0
    assert (tmp_path / "stopped").read_text() == str(int(signal.SIGTERM))
    time.sleep(1.5)  # longer than the first restart pause
    assert _runs(tmp_path) == 1


def test_a_killed_child_is_replaced(tmp_path):
    wrapper = _wrapper(tmp_path, SERVING)
    try:
        wait_until(lambda: _runs(tmp_path) == 1, timeout_s=30, what="the child running")
        children = subprocess.run(
            ["pgrep", "-P", str(wrapper.pid)], capture_output=True, text=True, check=True
        ).stdout.split()
        subprocess.run(["kill", "-9", *children], check=True)
        wait_until(lambda: _runs(tmp_path) == 2, timeout_s=30, what="a new child after kill -9")
    finally:
        wrapper.send_signal(signal.SIGINT)
        assert wrapper.wait(10) == 0
