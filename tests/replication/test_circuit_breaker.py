"""The per-cluster circuit breaker's decisions, time passed in."""

from __future__ import annotations

from replication.circuit_breaker import (
    BreakerPhase,
    BreakerPolicy,
    BreakerState,
    allow,
    record_failure,
    record_success,
)

POLICY = BreakerPolicy(failure_threshold=2, base_backoff_s=5.0, max_backoff_s=20.0)


def _fail(state: BreakerState, now: float) -> BreakerState:
    return record_failure(state, now=now, error=f"refused at {now:g}", policy=POLICY)


def test_closed_breaker_allows_calls_and_opens_at_the_threshold():
    state = BreakerState()
    assert allow(state, now=0) == (True, state)
    state = _fail(state, 0)
    assert state.phase is BreakerPhase.CLOSED and not state.is_open  # one failure is not an outage yet
    assert allow(state, now=1)[0]
    state = _fail(state, 1)
    assert state.phase is BreakerPhase.OPEN and state.is_open
    assert state.retry_at == 6.0 and state.last_error == "refused at 1" and state.failing_since == 0


def test_open_breaker_refuses_until_its_backoff_ends_then_lets_one_trial_through():
    state = _fail(_fail(BreakerState(), 0), 1)  # open until 6
    assert allow(state, now=5.9) == (False, state)
    allowed, trial = allow(state, now=6)
    assert allowed and trial.phase is BreakerPhase.HALF_OPEN and trial.is_open
    assert allow(trial, now=6.5)[0] is False  # only one trial at a time


def test_failed_trials_double_the_backoff_up_to_the_cap():
    state, now = _fail(_fail(BreakerState(), 0), 0), 0.0
    pauses = []
    for _ in range(4):
        pauses.append(state.retry_at - now)
        now = state.retry_at
        _, state = allow(state, now=now)
        state = _fail(state, now)
    assert pauses == [5.0, 10.0, 20.0, 20.0]
    assert state.failing_since == 0  # the outage began with the first failure


def test_a_success_closes_the_breaker_and_forgets_the_outage():
    state = _fail(_fail(BreakerState(), 0), 0)
    _, trial = allow(state, now=state.retry_at)
    assert record_success(trial) == BreakerState()
    assert record_success(_fail(BreakerState(), 0)) == BreakerState()  # a lone failure is forgotten too
