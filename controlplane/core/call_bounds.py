"""Calls a web request makes to other systems (Kafka reads, schema-registry lookups, the identity provider):
bounded together, never piled up in one web process, and skipped by every web process while the system
does not answer.

- One deadline per request (`RequestDeadline`, a middleware): MIRRORPLANE_WEB_READ_TIMEOUT_S from the
  moment the request arrived, for all its outbound calls together. `timeout_s(what)` gives the next call
  what is left, or raises `DeadlinePassed` (504) naming what was not asked and what to check. Outside a
  request (a command, a task) each call gets the whole setting.
- Slots: at most MIRRORPLANE_WEB_OUTBOUND_REQUESTS requests of one web process wait on other systems at
  once (`timeout_s` takes the request's slot at its first call, the middleware gives it back). One more is
  refused at once (`OutboundBusy`, 503) rather than queued, so every web process keeps threads for
  everything else: `/healthz`, the pages that read only the database.
- Breakers shared by every web process, in Redis: `replication.circuit_breaker`'s rule (the one rule of the
  workers and the web) with the state of each remote system under one key. A system that did not answer
  once is refused at once by every process (`WEB_POLICY`: one failure opens it) until its pause ends; then
  one process, and one only, makes the trial call (the probe), whose success closes it for all. When Redis
  does not answer, calls go ahead unguarded (logged): Redis being away must not also stop the reads.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import redis
from django.conf import settings

from controlplane.core.errors import ClusterUnavailable
from controlplane.core.shared_redis import redis_client
from replication import circuit_breaker
from replication.circuit_breaker import BreakerPhase, BreakerPolicy, BreakerState

log = logging.getLogger(__name__)
T = TypeVar("T")


class DeadlinePassed(ClusterUnavailable):
    """The request's time for outbound calls ran out before this one (HTTP 504)."""

    http_status = 504


class OutboundBusy(ClusterUnavailable):
    """This web process already has its most requests waiting on other systems (HTTP 503)."""

    http_status = 503


# -- the request's deadline and slot ------------------------------------------------------------------------
@dataclass
class _Request:
    deadline: float  # time.monotonic()
    holds_slot: bool = False


_current: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("outbound_request", default=None)
_slots_lock = threading.Lock()
_slots_taken = 0


def budget_s() -> float:
    """A request's time for all its outbound calls together."""
    return settings.MIRRORPLANE_WEB_READ_TIMEOUT_S


def remaining_s() -> float:
    """What is left of the request's time (the whole budget outside a request)."""
    request = _current.get()
    return budget_s() if request is None else request.deadline - time.monotonic()


def timeout_s(what: str) -> float:
    """The bound of the next outbound call of this request, about to ask `what` (e.g. "cluster A"): what is
    left of the deadline. Raises DeadlinePassed when nothing is, OutboundBusy when the process has no slot."""
    request = _current.get()
    if request is None:
        return budget_s()
    left = request.deadline - time.monotonic()
    if left <= 0.05:
        raise DeadlinePassed(
            f"{what} was not asked: this request's {budget_s():g} s for calls to other systems "
            "(MIRRORPLANE_WEB_READ_TIMEOUT_S) ran out on the calls before it. Reload the page; if it keeps "
            "happening, check those systems (Test connection on the Clusters page)"
        )
    if not request.holds_slot:
        _take_slot(what)
        request.holds_slot = True
    return left


def _take_slot(what: str) -> None:
    global _slots_taken
    with _slots_lock:
        if _slots_taken >= settings.MIRRORPLANE_WEB_OUTBOUND_REQUESTS:
            busy = _slots_taken
        else:
            _slots_taken += 1
            return
    raise OutboundBusy(
        f"{what} was not asked: this web process is already waiting on other systems for {busy} "
        "requests (MIRRORPLANE_WEB_OUTBOUND_REQUESTS). Try again in a few seconds; if it keeps happening, a "
        "cluster or schema registry answers slowly: check them with Test connection on the Clusters page"
    )


def _give_slot_back() -> None:
    global _slots_taken
    with _slots_lock:
        _slots_taken -= 1


class RequestDeadline:
    """Middleware: the request's deadline for outbound calls starts when it arrives."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        state = _Request(deadline=time.monotonic() + budget_s())
        token = _current.set(state)
        try:
            return self.get_response(request)
        finally:
            _current.reset(token)
            if state.holds_slot:
                _give_slot_back()


# -- breakers shared by the web processes -------------------------------------------------------------------
# One call that did not answer opens a remote system's breaker for every web process: a viewer's page then
# says so at once, instead of each process (and each of its threads) waiting out its own timeouts.
WEB_POLICY_THRESHOLD = 1
_PREFIX = "mirrorplane:breaker:"


def had_fair_time(timeout_s: float) -> bool:
    """Does a call given `timeout_s` that did not answer count against the system? Only with half the
    request's time or more: a call cut short by the calls before it says the request ran out of time, not
    that the system does not answer (a registry answering in 1.5 s is slow, not down)."""
    return timeout_s >= budget_s() / 2


def web_policy() -> BreakerPolicy:
    """The web's breakers: `replication.circuit_breaker`'s pauses, opened by one failure."""
    return BreakerPolicy(
        failure_threshold=WEB_POLICY_THRESHOLD, max_backoff_s=settings.MIRRORPLANE_CLUSTER_BACKOFF_MAX_S
    )


def _redis() -> redis.Redis:
    return redis_client(timeout_s=1)


def _load(key: str) -> BreakerState:
    raw = _redis().get(_PREFIX + key)
    if raw is None:
        return BreakerState()
    fields = json.loads(raw)
    return BreakerState(**{**fields, "phase": BreakerPhase(fields["phase"])})


def _store(key: str, state: BreakerState, policy: BreakerPolicy) -> None:
    if state == BreakerState():
        _redis().delete(_PREFIX + key)
        return
    # Kept past the longest pause, so a breaker nobody asks about any more goes away by itself.
    ttl_s = int(policy.max_backoff_s * 4 + 60)
    _redis().set(_PREFIX + key, json.dumps(dataclasses.asdict(state)), ex=ttl_s)


def breaker_allow(key: str, *, now: float) -> BreakerState | None:
    """None when a call to the system `key` may go now; else its open breaker's state (why, and when it is
    asked again). Past the pause, the first process to ask makes the trial call; the others are refused."""
    try:
        state = _load(key)
        allowed, _ = circuit_breaker.allow(state, now=now)
        if not allowed:
            return state
        # The state stays OPEN in Redis: the trial is claimed for a while, and when its process dies
        # before it records the outcome another process makes the trial once the claim expires.
        if state.phase is BreakerPhase.OPEN:
            claimed = _redis().set(_PREFIX + key + ":trial", "1", nx=True, ex=max(int(budget_s()) + 1, 2))
            if not claimed:
                return state
        return None
    except (redis.RedisError, ValueError, TypeError):
        log.warning("breaker %s not checked: Redis did not answer", key, exc_info=True)
        return None


def breaker_record(key: str, *, error: str | None, now: float) -> None:
    """The call to `key` answered (`error` None) or did not (`error` says why): for every web process."""
    policy = web_policy()
    try:
        state = _load(key)
        if error is None:
            if state != BreakerState():
                _store(key, circuit_breaker.record_success(state), policy)
            return
        if state.phase is BreakerPhase.OPEN and now < state.retry_at:
            return  # a call made before another process opened it: the pause is not doubled for it
        _store(key, circuit_breaker.record_failure(state, now=now, error=error, policy=policy), policy)
        _redis().delete(_PREFIX + key + ":trial")
    except (redis.RedisError, ValueError, TypeError):
        log.warning("breaker %s not updated: Redis did not answer", key, exc_info=True)


class BreakerOpen(Exception):
    """A remote system's breaker is open: it is not asked now (`breaker_call`)."""

    def __init__(self, state: BreakerState, *, now: float) -> None:
        super().__init__(
            f"it did not answer the last {state.failures} requests ({state.last_error}); "
            f"it is asked again in {max(state.retry_at - now, 0):.0f} s"
        )
        self.state = state


def breaker_call(key: str, call: Callable[[], T], *, unanswered: Callable[[Exception], str | None]) -> T:
    """`call()` behind the shared breaker of the system `key`: BreakerOpen at once while it is open. An
    exception `unanswered` gives a reason for (no answer, a server error) counts against the system for
    every web process; any other outcome shows it answers."""
    now = time.time()
    if (state := breaker_allow(key, now=now)) is not None:
        raise BreakerOpen(state, now=now)
    try:
        result = call()
    except Exception as exc:
        breaker_record(key, error=unanswered(exc), now=time.time())
        raise
    breaker_record(key, error=None, now=time.time())
    return result


def breakers_reset() -> None:
    """Forget every remote system's failures (tests)."""
    client = _redis()
    for key in client.scan_iter(_PREFIX + "*"):
        client.delete(key)
