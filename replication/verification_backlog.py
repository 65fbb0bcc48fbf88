"""What a verification run leaves waiting in a flow: its backlog. Pure (no I/O, time passed in).

A run verifies the partitions with something new in rotation (`replication.verification.rotation`) while
its byte and time budgets last. When the flow writes more than the budgets read (`VERIFY_MAX_BYTES_PER_S`
is below about twice the flow's bytes/s: each record is read on both clusters), the runs fall behind:
every partition still gets a turn, but each waits longer and brings more records. The newest look at the
flow (`checked_at`) stays recent all the while, so it cannot say this; the backlog does: the partitions
whose replicated, synced records no run has verified yet, those records, and the least recent look at
one of them (how long the most neglected one has waited).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

# A backlog that did not change is written again at most this often, so its age says the verifier still
# runs (and a flow with nothing new costs one small write a minute, not one a run).
BACKLOG_REFRESH_S = 60.0
# Older than this (two refreshes missed), the backlog is shown as stale: the verifier is not running.
BACKLOG_STALE_S = 2 * BACKLOG_REFRESH_S + 30.0
# A partition with new records that waits longer than this for a look: the verifier is behind the flow
# (every partition is to be checked at least every 10 minutes).
BEHIND_S = 600


class Turn(Protocol):
    """A partition's turn in a run (`replication.verification.PartitionTurn`), as the backlog reads it."""

    @property
    def records_left(self) -> int: ...

    checked: bool


@dataclass(frozen=True)
class Backlog:
    partitions: int = 0  # partitions with records waiting for verification
    records: int = 0  # their source offsets, replicated and synced, that no run verified yet
    oldest_look_at: datetime.datetime | None = None  # the least recent look at one of them; None: none waits

    def wait_s(self, *, now: datetime.datetime) -> float | None:
        """How long the most neglected waiting partition has gone without a look; None when none waits."""
        return None if self.oldest_look_at is None else max(0.0, (now - self.oldest_look_at).total_seconds())

    def behind(self, *, now: datetime.datetime) -> bool:
        """Some partition with new records has waited longer than `BEHIND_S` for a look."""
        wait_s = self.wait_s(now=now)
        return wait_s is not None and wait_s > BEHIND_S


NOTHING_WAITS = Backlog()
T = TypeVar("T", bound=Turn)


def run_backlog(
    turns: Sequence[T],
    *,
    last_checked: Callable[[T], datetime.datetime | None],
    at: datetime.datetime,
) -> Backlog:
    """The backlog a run leaves (`turns`: its partitions with something new, after the run): a partition
    the run looked at but could not finish was looked at `at`; one it never reached, at its last look (a
    partition never looked at before waits from this run)."""
    waiting = [turn for turn in turns if turn.records_left > 0]
    if not waiting:
        return NOTHING_WAITS
    looks = [at if turn.checked else (last_checked(turn) or at) for turn in waiting]
    return Backlog(len(waiting), sum(turn.records_left for turn in waiting), min(looks))


def write_due(
    stored: Backlog | None,
    stored_at: datetime.datetime | None,
    found: Backlog,
    *,
    now: datetime.datetime,
) -> bool:
    """Whether the run writes its backlog: when it changed, or it was last written `BACKLOG_REFRESH_S` ago."""
    if stored is None or stored_at is None or stored != found:
        return True
    return (now - stored_at).total_seconds() >= BACKLOG_REFRESH_S
