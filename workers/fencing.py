"""Generation fencing in the runtime (`replication.generations`): before any task of a flow's new
assignment initialises its transactions, one worker fences every transactional id the flow has used.

A slice about to build its task asks `generation_fenced`: the first slice of a new generation to ask
takes the flow's fencing lock (Redis), records the fencing as begun, fences the ids on the target (those
recorded, those the target's coordinators list, and the new generation's: `replication.kafka.fencing`)
and records it done; the others find the lock taken and wait a moment (their chains keep their leases). The task then checks once more around its own
`init_transactions` (`AssignmentGuard`, `MirrorSourceTask(superseded=...)`), so a task of a generation
superseded meanwhile stops before it writes, and a zombie of an earlier generation that wakes up is told
why it was fenced. Flows without transactions have nothing to fence.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from redis.exceptions import LockError

from controlplane.status import runtime
from controlplane.status.models import FlowEventKind
from controlplane.status.runtime import FlowSpec
from replication.generations import Fencing, fencing_for, may_write, superseded_reason
from replication.kafka.fencing import TransactionsUnlisted, fence_transactional_ids, transactional_task_ids
from replication.kafka.source_io import transactional
from workers import context
from workers.leases import RedisLeases

log = logging.getLogger(__name__)

# The fencing lock's expiry: longer than fencing every id takes (FENCE_TIMEOUT_S per round of ids), short
# enough that a worker dying while it fences holds the flow's new tasks back only this long.
FENCE_LOCK_S = 120.0


def generation_fenced(*, spec: FlowSpec, generation: str, tasks: int) -> bool:
    """Whether the `tasks` tasks of the flow's assignment `generation` may write: its earlier generations
    are fenced (here, when nobody did yet). False while another worker fences: try again shortly."""
    if not transactional(spec.flow):
        return True
    leases = context.leases()
    if may_write(leases.fencing(spec.flow_id), generation=generation):
        return True
    lock = leases.fencing_lock(spec.flow_id, timeout_s=FENCE_LOCK_S)
    if not lock.acquire():
        return False
    try:
        stored = leases.fencing(spec.flow_id)
        if not may_write(stored, generation=generation):  # nobody fenced it while this one waited
            due = fencing_for(stored, generation=generation, tasks=tasks, listed=_listed_task_ids(spec))
            _fence(spec, due, tasks=tasks, leases=leases)
    finally:
        try:
            lock.release()
        except LockError:  # expired meanwhile: the fencing is recorded (or redone by the next holder)
            log.warning("flow %s: the fencing lock expired before it was released", spec.flow.name)
    return True


def _fence(spec: FlowSpec, due: Fencing, *, tasks: int, leases: RedisLeases) -> None:
    leases.save_fencing(spec.flow_id, due)  # begun: a task of any other generation stops now
    fence_transactional_ids(spec.flow, spec.target, task_ids=due.task_ids)
    leases.save_fencing(spec.flow_id, replace(due, fenced=True))
    message = (
        f"task assignment generation {due.generation} ({tasks} task(s)): the transactional ids of "
        f"tasks 0..{due.task_ids - 1} fenced before its tasks write"
    )
    log.info("flow %s: %s", spec.flow.name, message)
    runtime.flow_event_record(
        flow_id=spec.flow_id, kind=FlowEventKind.INFO, message=message, at=datetime.now(UTC)
    )


def _listed_task_ids(spec: FlowSpec) -> int:
    """The task ids of the flow its target's transaction coordinators know (0 when it cannot say: the
    ids recorded in Redis and the new generation's are fenced then)."""
    try:
        return transactional_task_ids(spec.flow, spec.target)
    except TransactionsUnlisted as exc:
        log.warning("flow %s: %s; fencing the task ids recorded only", spec.flow.name, exc)
        return 0


@dataclass
class AssignmentGuard:
    """A cached task's `superseded` (`MirrorSourceTask`): why the generation it was admitted under is no
    longer the flow's fenced one, or None while it is. Asked around init_transactions and when fenced."""

    flow_id: int
    generation: str | None = None  # None: not admitted yet (a take-over's task, prepared beforehand)
    tasks: int = 0

    def admit(self, *, generation: str, tasks: int) -> None:
        self.generation, self.tasks = generation, tasks

    def __call__(self) -> str | None:
        if self.generation is None:
            return "its assignment was not checked against the flow's fencing yet"
        fencing = context.leases().fencing(self.flow_id)
        return superseded_reason(fencing, generation=self.generation, tasks=self.tasks)
