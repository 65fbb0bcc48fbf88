"""The runtime's decisions, pure: which task chains to start, what a slice does, backoff, stickiness.

A *chain* is the sequence of `replicate_slice` messages of one (flow, task index): one slice runs, then
enqueues the next. Exactly one chain per (flow, task index) holds its lease; a chain is named by its
lease token, and its slices are numbered (`seq`), so a worker knows whether the MirrorSourceTask it
cached ran the previous slice of the same chain (then its in-memory state is current) or not.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from replication.connector import TopicPartition, assign_partitions
from replication.generations import assignment_generation


@dataclass(frozen=True, order=True)
class TaskRef:
    """One task of one flow: the unit of leasing and of client caching."""

    flow_id: int
    task_index: int


@dataclass(frozen=True)
class FlowPlan:
    """The source partitions a flow replicates (their remote partitions exist), for one config version.

    Written by the flow's metadata task after each topic sync; read by the supervisor and the slices.
    """

    config_version: str
    partitions: tuple[TopicPartition, ...]
    # task_partitions' answers: a plan kept across slices is assigned (sorted) once per tasks.max
    _assignments: dict[int, list[tuple[TopicPartition, ...]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _generations: dict[int, str] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> str:
        return json.dumps({"config_version": self.config_version, "partitions": self.partitions})

    @classmethod
    def from_json(cls, text: str | bytes) -> FlowPlan:
        data = json.loads(text)
        return cls(data["config_version"], tuple((topic, int(p)) for topic, p in data["partitions"]))

    def task_partitions(self, tasks_max: int) -> list[tuple[TopicPartition, ...]]:
        """MM2's assignment: min(tasks.max, partitions) tasks, partitions round robin."""
        if tasks_max not in self._assignments:
            self._assignments[tasks_max] = [
                tuple(task) for task in assign_partitions(self.partitions, tasks_max)
            ]
        return self._assignments[tasks_max]

    def generation(self, tasks_max: int) -> str:
        """The generation of that assignment (`replication.generations`), digested once per tasks.max."""
        if tasks_max not in self._generations:
            self._generations[tasks_max] = assignment_generation(self.task_partitions(tasks_max))
        return self._generations[tasks_max]


@dataclass(frozen=True)
class RunnableFlow:
    flow_id: int
    config_version: str
    tasks_max: int


def desired_tasks(*, flows: Sequence[RunnableFlow], plans: Mapping[int, FlowPlan | None]) -> list[TaskRef]:
    """Every task a runnable flow should have now: one per assigned share of its current plan.

    A flow whose plan is missing or older than its configuration has none yet: its metadata task
    has not synced that configuration (topics to mirror, remote topics created) so far.
    """
    wanted: list[TaskRef] = []
    for flow in flows:
        plan = plans.get(flow.flow_id)
        if plan is None or plan.config_version != flow.config_version:
            continue
        wanted.extend(
            TaskRef(flow.flow_id, index) for index in range(len(plan.task_partitions(flow.tasks_max)))
        )
    return wanted


class SliceAction(enum.Enum):
    RUN = "run"
    WAIT = "wait"  # the plan is missing or older than the config: keep the lease, try again shortly
    STOP = "stop"  # the chain ends and releases its lease


@dataclass(frozen=True)
class SliceDecision:
    action: SliceAction
    reason: str
    partitions: tuple[TopicPartition, ...] = ()
    retired: bool = False  # STOP because the flow runs fewer tasks now: this task index is gone
    generation: str = ""  # RUN: the assignment's generation (replication.generations)
    tasks: int = 0  # RUN: how many tasks that assignment has


def decide_slice(
    *,
    exists: bool,
    runnable: bool,
    config_version: str,
    tasks_max: int,
    plan: FlowPlan | None,
    task_index: int,
) -> SliceDecision:
    """What a chain's slice does, given the flow as stored now and its current plan."""
    if not exists:
        return SliceDecision(SliceAction.STOP, "flow deleted")
    if not runnable:
        return SliceDecision(SliceAction.STOP, "flow paused or disabled")
    if plan is None or plan.config_version != config_version:
        return SliceDecision(SliceAction.WAIT, "waiting for the topic sync of the current configuration")
    assignment = plan.task_partitions(tasks_max)
    if task_index >= len(assignment):
        return SliceDecision(
            SliceAction.STOP, f"task {task_index} retired ({len(assignment)} task(s) now)", retired=True
        )
    return SliceDecision(
        SliceAction.RUN,
        "",
        assignment[task_index],
        generation=plan.generation(tasks_max),
        tasks=len(assignment),
    )


@dataclass(frozen=True)
class ChainPosition:
    """Which chain slice a cached MirrorSourceTask last ran, under which configuration."""

    config_version: str
    chain: str
    seq: int


def cached_task_is_current(
    *, cached: ChainPosition | None, config_version: str, chain: str, seq: int
) -> bool:
    """A cached task may run slice `seq` only if it ran slice `seq - 1` of the same chain and config.

    Otherwise another worker (or another chain) may have moved the positions since, and the task's
    in-memory positions are stale: it must be rebuilt from the stored positions.
    """
    return cached == ChainPosition(config_version, chain, seq - 1)


def backoff_s(*, consecutive_failures: int, base_s: float = 0.5, cap_s: float) -> float:
    """Exponential pause before the next slice of a failing chain (0 while it succeeds)."""
    if consecutive_failures <= 0:
        return 0.0
    return min(base_s * 2 ** (consecutive_failures - 1), cap_s)


@dataclass(frozen=True)
class PoolLoad:
    """Chains held now by this worker and by each other live worker of a chain's pool (their presence)."""

    held: int
    others: tuple[int, ...]

    def uneven(self) -> bool:
        """One chain moving from this worker to the least loaded other one leaves the pool more even."""
        return any(self.held - other >= 2 for other in self.others)


def stays_on_worker(*, seq: int, rebalance_slices: int, load: Callable[[], PoolLoad | None]) -> bool:
    """The next slice goes to this worker's own queue. Every `rebalance_slices` slices the chain may go
    back to the shared queue, so that an idle (new) worker can take it (scale-out rebalancing), but only
    when that evens its pool: this worker holds two chains more than another of the pool, as Connect's
    incremental cooperative rebalancing moves only the tasks that balance. A move restarts the task on
    the other worker (its clients, every partition's start, a status row each), which at thousands of
    partitions costs seconds; a balanced fleet keeps its chains. `load` is read at those points only;
    None (Redis cannot tell) offers the chain, as before."""
    if rebalance_slices <= 0 or (seq + 1) % rebalance_slices != 0:
        return True
    load_now = load()
    return load_now is not None and not load_now.uneven()
