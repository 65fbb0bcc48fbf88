"""The generation fencing decisions (replication.generations), pure: which ids a new assignment fences,
when its tasks may write, and why a task of a superseded assignment stops."""

from __future__ import annotations

from replication.connector import assign_partitions
from replication.generations import (
    Fencing,
    assignment_generation,
    fencing_for,
    may_write,
    superseded_reason,
)

PARTITIONS = [("orders", p) for p in range(4)]


def generation(tasks_max: int, partitions=PARTITIONS) -> str:
    return assignment_generation(assign_partitions(partitions, tasks_max))


def test_the_generation_is_the_assignment():
    assert generation(3) == generation(3)
    assert generation(2) != generation(3)
    assert generation(3) != generation(3, [*PARTITIONS, ("orders", 4)])  # a partition added
    assert generation(4) == generation(9)  # 4 partitions: tasks.max 4 and 9 assign the same way


def test_a_new_generation_fences_every_id_ever_used_before_its_tasks_write():
    first = fencing_for(None, generation=generation(3), tasks=3)  # a new flow (or Redis lost the record)
    assert first == Fencing(generation(3), task_ids=3, fenced=False)
    assert not may_write(first, generation=generation(3))  # begun is not done
    three = Fencing(generation(3), task_ids=3, fenced=True)
    assert may_write(three, generation=generation(3))

    two = fencing_for(three, generation=generation(2), tasks=2)  # 3 -> 2 still fences id 2
    assert two == Fencing(generation(2), task_ids=3, fenced=False)
    assert not may_write(three, generation=generation(2))
    back = fencing_for(Fencing(generation(2), 3, True), generation=generation(3), tasks=3)
    assert back == Fencing(generation(3), task_ids=3, fenced=False)  # 3 -> 2 -> 3 fences again
    # A fencing begun and not recorded done (its worker died) is done again by the next worker.
    assert fencing_for(two, generation=generation(2), tasks=2) == two
    # Ids the target's coordinators know count too (used before Redis lost the record, or by an earlier
    # dedicated-mode process).
    assert fencing_for(None, generation=generation(2), tasks=2, listed=5).task_ids == 5


def test_a_task_of_a_superseded_generation_is_told_why_it_stops():
    fenced_for_two = Fencing(generation(2), task_ids=3, fenced=True)
    assert superseded_reason(fenced_for_two, generation=generation(2), tasks=2) is None
    reason = superseded_reason(fenced_for_two, generation=generation(3), tasks=3)
    assert "assigned anew" in reason and "were fenced" in reason and generation(3) in reason
    being_fenced = Fencing(generation(2), task_ids=3, fenced=False)
    assert "are being fenced" in superseded_reason(being_fenced, generation=generation(3), tasks=3)
    assert "are being fenced" in superseded_reason(being_fenced, generation=generation(2), tasks=2)
    assert superseded_reason(None, generation=generation(2), tasks=2) is not None


def test_fencing_round_trips_through_its_stored_form():
    stored = Fencing(generation(3), task_ids=5, fenced=True)
    assert Fencing.from_json(stored.to_json().encode()) == stored
