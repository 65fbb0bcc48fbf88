"""Migration cutover decisions, pure: whether the source is fenced (its producers stopped).

Mirrorplane cannot stop an application's producers; the operator does, and the cutover proves it: the
end offsets of every replicated source partition must stay the same for `still_s` seconds. Any change
(records appended, or an end that went back: a recreated topic) starts the wait again, and what moved
is kept as the evidence a refusal shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from replication.topic_partition import partition_label

TopicPartition = tuple[str, int]


@dataclass
class FenceWatch:
    still_s: float
    started: float  # monotonic seconds
    ends: dict[TopicPartition, int]
    still_since: float = field(init=False)
    appended: dict[TopicPartition, int] = field(default_factory=dict)  # records appended while watched

    def __post_init__(self) -> None:
        self.still_since = self.started

    def observe(self, ends: Mapping[TopicPartition, int], *, now: float) -> None:
        moved = {key: end - self.ends.get(key, 0) for key, end in ends.items() if end != self.ends.get(key)}
        if moved:
            self.still_since = now
            for key, count in moved.items():
                self.appended[key] = self.appended.get(key, 0) + max(count, 0)
        self.ends = dict(ends)

    def fenced(self, *, now: float) -> bool:
        return now - self.still_since >= self.still_s

    def evidence(self, *, now: float) -> dict:
        busiest = sorted(self.appended.items(), key=lambda item: -item[1])[:20]
        return {
            "fence_s": self.still_s,
            "watched_s": round(now - self.started, 1),
            "still_for_s": round(now - self.still_since, 1),
            "partitions": len(self.ends),
            "appended_while_watched": {
                partition_label(topic, partition): count for (topic, partition), count in busiest
            },
        }
