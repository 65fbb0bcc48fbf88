"""A `PartitionState` for the tests of a task's collaborators (`replication.delivery`, `transactions`...)."""

from __future__ import annotations

from replication.partition_state import Acknowledgements, PartitionState


def partition_state(
    partition: int = 0, *, acks: Acknowledgements | None = None, start: int = 0, topic: str = "orders"
) -> PartitionState:
    """A task's state of source partition `topic[partition]`, mirrored to `A.<topic>`."""
    return PartitionState(
        topic=topic,
        partition=partition,
        remote_topic=f"A.{topic}",
        start=start,
        offset_lag_max=100,
        acks=acks if acks is not None else Acknowledgements(),
    )
