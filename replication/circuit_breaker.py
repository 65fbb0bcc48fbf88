"""A circuit breaker per cluster: stop calling a cluster that does not answer, try again later, report why.

Pure decisions, time passed in (epoch seconds), no I/O. A breaker is CLOSED while calls succeed. After
`failure_threshold` consecutive failures it OPENs: calls are refused until `retry_at`, when one trial
call is let through (HALF_OPEN). A success CLOSEs it; a failure OPENs it again with the pause doubled, up
to `max_backoff_s`. Refused calls cost nothing, so one unreachable cluster costs its flows only the
trial calls, one per backoff period, each bounded by its own timeout.

`BreakerState` is immutable: `allow`, `record_success` and `record_failure` return decisions and new
states, so callers (one per worker process, shared by the flows of that cluster) keep them however
suits them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class BreakerPhase(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    failure_threshold: int = 2
    base_backoff_s: float = 5.0
    max_backoff_s: float = 60.0

    def backoff_s(self, *, openings: int) -> float:
        """The pause after the breaker opened `openings` times in a row (>= 1)."""
        return min(self.base_backoff_s * 2 ** max(openings - 1, 0), self.max_backoff_s)


@dataclass(frozen=True)
class BreakerState:
    phase: BreakerPhase = BreakerPhase.CLOSED
    failures: int = 0  # consecutive failed calls
    openings: int = 0  # consecutive openings (the backoff exponent)
    retry_at: float = 0.0  # OPEN: when the trial call is allowed
    last_error: str = ""  # why the last call failed ("" after a success)
    failing_since: float | None = None  # when the current run of failures began

    @property
    def is_open(self) -> bool:
        """The cluster counts as unreachable (OPEN, or HALF_OPEN waiting for its trial call)."""
        return self.phase is not BreakerPhase.CLOSED


def allow(state: BreakerState, *, now: float) -> tuple[bool, BreakerState]:
    """May a call go to the cluster now? An OPEN breaker past `retry_at` lets one trial call through."""
    if state.phase is BreakerPhase.CLOSED:
        return True, state
    if state.phase is BreakerPhase.OPEN and now >= state.retry_at:
        return True, replace(state, phase=BreakerPhase.HALF_OPEN)
    return False, state


def record_success(state: BreakerState) -> BreakerState:
    return BreakerState()


def record_failure(
    state: BreakerState, *, now: float, error: str, policy: BreakerPolicy = BreakerPolicy()
) -> BreakerState:
    """A call failed with `error`: count it, and open (again) when the threshold is reached."""
    failures = state.failures + 1
    failing_since = now if state.failing_since is None else state.failing_since
    if state.phase is BreakerPhase.CLOSED and failures < policy.failure_threshold:
        return replace(state, failures=failures, last_error=error, failing_since=failing_since)
    openings = state.openings + 1
    return BreakerState(
        phase=BreakerPhase.OPEN,
        failures=failures,
        openings=openings,
        retry_at=now + policy.backoff_s(openings=openings),
        last_error=error,
        failing_since=failing_since,
    )
