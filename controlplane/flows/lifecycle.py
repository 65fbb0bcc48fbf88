"""The flow lifecycle: its states and the only transitions between them.

Every write of `Flow.state` goes through `transition` here (services, failover operations and the
workers call the named functions below); settings edits and MM2 imports never change it, except that
turning MM2's `enabled` on or off is the `enable`/`disable` transition.

```
DISABLED --enable--> ACTIVE --pause--> PAUSED --resume--> ACTIVE
ACTIVE --fault--> FAULTED --recover--> ACTIVE            (a worker finds the flow unable to run, and back)
ACTIVE | PAUSED | FAULTED --begin_failover--> FAILING_OVER --complete_failover--> FAILED_OVER
FAILING_OVER --abort_failover--> the state it came from   (drain timeout, refused)
FAILED_OVER --begin_failback--> FAILING_BACK --complete_failback--> PAUSED (resume when consumers moved)
FAILING_BACK --abort_failback--> FAILED_OVER
ACTIVE | PAUSED | FAULTED --begin_cutover--> MIGRATING --complete_cutover--> MIGRATED   (for good)
MIGRATING --abort_cutover--> the state it came from      (the fence broke, a range mismatched, ...)
ACTIVE | PAUSED | FAULTED --disable--> DISABLED
```

Workers replicate a flow in `RUNNABLE_STATES`: a FAULTED flow keeps being tried so that it recovers on
its own, and a FAILING_OVER (MIGRATING) flow replicates until the failover's (cutover's) drain has
copied every record. MIGRATED is final: the clients use the target, nothing replicates.
A transition into the state the flow is already in changes nothing and is allowed (pressing Pause
twice, an operation resumed after a crash repeating its phase).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from controlplane.core import microcache
from controlplane.core.errors import ServiceConflict
from controlplane.flows.models import Flow, FlowState

S = FlowState
RUNNABLE_STATES = frozenset({S.ACTIVE, S.FAULTED, S.FAILING_OVER, S.MIGRATING})
FAILOVER_STATES = frozenset({S.FAILING_OVER, S.FAILED_OVER, S.FAILING_BACK})


@dataclass(frozen=True)
class Transition:
    sources: frozenset[str]
    target: str | None  # None: back to the state given by the caller (abort_failover)


TRANSITIONS: Mapping[str, Transition] = {
    "enable": Transition(frozenset({S.DISABLED}), S.ACTIVE),
    "disable": Transition(frozenset({S.ACTIVE, S.PAUSED, S.FAULTED}), S.DISABLED),
    "pause": Transition(frozenset({S.ACTIVE, S.FAULTED}), S.PAUSED),
    "resume": Transition(frozenset({S.PAUSED}), S.ACTIVE),
    "fault": Transition(frozenset({S.ACTIVE}), S.FAULTED),
    "recover": Transition(frozenset({S.FAULTED}), S.ACTIVE),
    "begin_failover": Transition(frozenset({S.ACTIVE, S.PAUSED, S.FAULTED}), S.FAILING_OVER),
    "abort_failover": Transition(frozenset({S.FAILING_OVER}), None),
    "complete_failover": Transition(frozenset({S.FAILING_OVER}), S.FAILED_OVER),
    "begin_failback": Transition(frozenset({S.FAILED_OVER}), S.FAILING_BACK),
    "abort_failback": Transition(frozenset({S.FAILING_BACK}), S.FAILED_OVER),
    "complete_failback": Transition(frozenset({S.FAILING_BACK}), S.PAUSED),
    "begin_cutover": Transition(frozenset({S.ACTIVE, S.PAUSED, S.FAULTED}), S.MIGRATING),
    "abort_cutover": Transition(frozenset({S.MIGRATING}), None),
    "complete_cutover": Transition(frozenset({S.MIGRATING}), S.MIGRATED),
}

# What an operator may start from the UI or API, by the transition that starts it.
ACTIONS: Mapping[str, str] = {
    "enable": "enable",
    "disable": "disable",
    "pause": "pause",
    "resume": "resume",
    "failover": "begin_failover",
    "failback": "begin_failback",
    "cutover": "begin_cutover",
}


class IllegalTransition(ServiceConflict):
    """The flow's current state does not allow the transition."""

    def __init__(self, *, flow_name: str, state: str, transition: str) -> None:
        self.state, self.transition = state, transition
        allowed = ", ".join(sorted(allowed_actions(state))) or "none"
        super().__init__(
            f"flow {flow_name} is {state}: {transition.replace('_', ' ')} is not allowed "
            f"(allowed now: {allowed})"
        )


def is_runnable(state: str) -> bool:
    return state in RUNNABLE_STATES


def can_fail_over(state: str) -> bool:
    """Whether a failover may start now: only then is "would it work?" (the readiness) a question."""
    return state in TRANSITIONS[ACTIONS["failover"]].sources


def initial_state(*, enabled: bool) -> str:
    return S.ACTIVE if enabled else S.DISABLED


@functools.cache  # a few states; the flows table asks for every row
def allowed_actions(state: str) -> frozenset[str]:
    """The operator actions the state allows (the UI shows only these)."""
    return frozenset(action for action, name in ACTIONS.items() if state in TRANSITIONS[name].sources)


def next_state(*, state: str, transition: str, previous: str | None = None) -> str | None:
    """The state after `transition` from `state`; None when it is not allowed. Pure."""
    rule = TRANSITIONS[transition]
    target = rule.target or previous
    if target is None:
        raise ValueError(f"{transition} needs the state to return to")
    if state == target:
        return target
    return target if state in rule.sources else None


def transition(*, flow: Flow, name: str, reason: str = "", previous: str | None = None) -> bool:
    """Apply transition `name` to `flow` (row locked); True when the state changed.

    Raises IllegalTransition when the current state does not allow it. `flow` is updated in place.
    """
    with transaction.atomic():
        current = Flow.objects.select_for_update().only("state").get(pk=flow.pk).state
        target = next_state(state=current, transition=name, previous=previous)
        if target is None:
            raise IllegalTransition(flow_name=flow.name, state=current, transition=name)
        changed = target != current
        if changed:
            now = timezone.now()
            Flow.objects.filter(pk=flow.pk).update(
                state=target, state_reason=reason, state_changed_at=now, updated_at=now
            )
            microcache.bump()
            flow.state_reason, flow.state_changed_at = reason, now
    flow.state = target
    return changed


def _flow(flow_id: int) -> Flow | None:
    return Flow.objects.select_related("source", "target").filter(pk=flow_id).first()


# -- the named transitions --------------------------------------------------------------------------------
def enable(*, flow: Flow) -> bool:
    return transition(flow=flow, name="enable")


def disable(*, flow: Flow) -> bool:
    return transition(flow=flow, name="disable")


def pause(*, flow: Flow) -> bool:
    return transition(flow=flow, name="pause")


def resume(*, flow: Flow) -> bool:
    return transition(flow=flow, name="resume")


def fault(*, flow_id: int, reason: str) -> bool:
    """A worker found the flow unable to run (a cluster refused, a data-loss stop): ACTIVE -> FAULTED.

    False when the flow is gone or in a state a fault does not change (paused, failing over, ...);
    a FAULTED flow gets the newer reason.
    """
    flow = _flow(flow_id)
    if flow is None or flow.state not in TRANSITIONS["fault"].sources | {S.FAULTED}:
        return False
    if flow.state == S.FAULTED:
        if flow.state_reason != reason:
            Flow.objects.filter(pk=flow_id, state=S.FAULTED).update(state_reason=reason)
            microcache.bump()
        return False
    try:
        return transition(flow=flow, name="fault", reason=reason)
    except IllegalTransition:  # changed state concurrently (paused, failover): nothing to fault
        return False


def recover(*, flow_id: int) -> bool:
    """The flow runs again: FAULTED -> ACTIVE. False when it was not faulted."""
    flow = _flow(flow_id)
    if flow is None or flow.state != S.FAULTED:
        return False
    try:
        return transition(flow=flow, name="recover")
    except IllegalTransition:
        return False


def begin_failover(*, flow: Flow) -> str:
    """-> FAILING_OVER; the state it came from (to return to on abort). Repeating it returns FAILING_OVER."""
    previous = Flow.objects.only("state").get(pk=flow.pk).state
    transition(flow=flow, name="begin_failover")
    return previous


def abort_failover(*, flow: Flow, previous: str) -> bool:
    if previous not in TRANSITIONS["begin_failover"].sources:
        raise ValueError(f"a failover cannot return to {previous}")
    return transition(flow=flow, name="abort_failover", previous=previous)


def complete_failover(*, flow: Flow) -> bool:
    return transition(flow=flow, name="complete_failover")


def begin_failback(*, flow: Flow) -> bool:
    return transition(flow=flow, name="begin_failback")


def abort_failback(*, flow: Flow) -> bool:
    return transition(flow=flow, name="abort_failback")


def complete_failback(*, flow: Flow) -> bool:
    return transition(flow=flow, name="complete_failback")


def begin_cutover(*, flow: Flow) -> str:
    """-> MIGRATING; the state it came from (to return to on abort)."""
    previous = Flow.objects.only("state").get(pk=flow.pk).state
    transition(flow=flow, name="begin_cutover")
    return previous


def abort_cutover(*, flow: Flow, previous: str) -> bool:
    if previous not in TRANSITIONS["begin_cutover"].sources:
        raise ValueError(f"a cutover cannot return to {previous}")
    return transition(flow=flow, name="abort_cutover", previous=previous)


def complete_cutover(*, flow: Flow) -> bool:
    return transition(flow=flow, name="complete_cutover")
