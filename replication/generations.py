"""Generations of a flow's task assignment and their fencing (exactly_once with transactions), pure.

A transactional task writes as `mirrorplane-<flow>-<task index>`, and starting, it fences the earlier
producers of its own id only. When the assignment changes (`tasks.max`, a partition count, topics
added or removed) partitions move between task indexes, and a frozen task of the previous assignment
(a *zombie*) may hold a partition under an id no new task uses (3 -> 2 tasks: id 2), or under an id
whose new task has not started yet while another new task already writes that partition. Kafka Connect
fences the whole previous generation before the new tasks start (KIP-618, `fenceZombieSourceTasks`);
so does Mirrorplane:

* A *generation* is one assignment: which task index owns which source partition
  (`assignment_generation`, a digest). A pool move or a configuration edit keeps it: every partition
  keeps its task index, whose new producer fences the old one of the same id.
* Before any task of a new generation initialises its transactions, one actor fences every id the flow
  has ever used (`Fencing.task_ids`, so 3 -> 2 still fences id 2, and those the target's transaction
  coordinators list: `replication.kafka.fencing`): it records the fencing as begun, fences, then
  records it done (`fencing_for`, `Fencing.fenced`). Tasks wait until their generation is recorded
  done (`may_write`).
* A task checks again after its own `init_transactions`: a fencing begun before that check fences it, a
  fencing begun after the check finds its producer initialised and fences it; either way a task of a
  superseded generation never writes (`superseded_reason`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]


def assignment_generation(assignment: Sequence[Sequence[TopicPartition]]) -> str:
    """The generation of an assignment (task index -> its partitions): equal assignments, equal digests."""
    text = json.dumps(assignment, separators=(",", ":"))  # 12 ms at 50,000 partitions
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Fencing:
    """A flow's fencing as stored: the generation it was last begun for, whether it is done, and how
    many task ids (0..task_ids-1) the flow has used in any generation so far."""

    generation: str
    task_ids: int
    fenced: bool

    def to_json(self) -> str:
        return json.dumps({"generation": self.generation, "task_ids": self.task_ids, "fenced": self.fenced})

    @classmethod
    def from_json(cls, text: str | bytes) -> Fencing:
        data = json.loads(text)
        return cls(str(data["generation"]), int(data["task_ids"]), bool(data["fenced"]))


def may_write(stored: Fencing | None, *, generation: str) -> bool:
    """Whether the tasks of `generation` may initialise their transactions and write: every earlier
    generation was fenced for it."""
    return stored is not None and stored.fenced and stored.generation == generation


def fencing_for(stored: Fencing | None, *, generation: str, tasks: int, listed: int = 0) -> Fencing:
    """The fencing to do before the `tasks` tasks of `generation` write, unless `may_write` says it is
    done: every id the flow ever used (as recorded, and the `listed` task ids the target's transaction
    coordinators know) and the new ones. Store it (`fenced` False) before fencing, then as done."""
    used = stored.task_ids if stored is not None else 0
    return Fencing(generation=generation, task_ids=max(used, listed, tasks), fenced=False)


def superseded_reason(stored: Fencing | None, *, generation: str, tasks: int) -> str | None:
    """Why a task of `generation` (of `tasks` tasks) must not write, or None while it may."""
    if may_write(stored, generation=generation):
        return None
    if stored is None:
        return "the fencing of its assignment's earlier generations is not recorded (Redis lost it?)"
    if stored.generation == generation:
        return "the earlier generations of its assignment are being fenced"
    return (
        f"the flow's partitions were assigned anew (generation {stored.generation}; this task's, of "
        f"{tasks} task(s), is {generation}) and the tasks of earlier assignments "
        f"{'were' if stored.fenced else 'are being'} fenced"
    )
