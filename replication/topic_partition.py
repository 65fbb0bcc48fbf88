"""A source or remote partition as the code and the people name it: the key `(topic, partition)` and its
label `orders[3]`, the one way pages, events, evidence and errors write it."""

from __future__ import annotations

TopicPartition = tuple[str, int]


def partition_label(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"
