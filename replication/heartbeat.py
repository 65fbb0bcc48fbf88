"""`MirrorHeartbeatTask`: MM2 heartbeats, `Heartbeat(source, target, now)` to `heartbeats` on the target.

The source task replicates each cluster's `heartbeats` downstream as `<alias>.heartbeats` (the policy
replicates heartbeats whatever the topic filter says), which is how `replication_hops` and
`upstream_clusters` see the topology and how an operator sees that a flow is alive end to end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from replication.config import FlowConfig
from replication.formats import Heartbeat
from replication.scheduler import PeriodicJob, Scheduler

EMIT_HEARTBEATS = "emit-heartbeats"


class HeartbeatSink(Protocol):
    def emit(self, heartbeats: Sequence[Heartbeat]) -> None:
        """Write the heartbeats and wait for the target's acknowledgement (raise on failure)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class HeartbeatMetrics:
    heartbeats_emitted: int
    last_heartbeat_ms: int | None


def heartbeat_for(flow: FlowConfig, *, now: float) -> Heartbeat:
    """The heartbeat a flow emits at wall-clock time `now` (epoch seconds)."""
    return Heartbeat(flow.source, flow.target, int(now * 1000))


class MirrorHeartbeatTask:
    """Emits a heartbeat every `emit.heartbeats.interval.seconds` while `emit.heartbeats.enabled`."""

    def __init__(self, *, flow: FlowConfig, sink: HeartbeatSink) -> None:
        self.flow = flow
        self._sink = sink
        self._scheduler = Scheduler(
            [
                PeriodicJob(
                    EMIT_HEARTBEATS,
                    interval_s=flow.emit_heartbeats_interval_seconds,
                    enabled=flow.emit_heartbeats_enabled,
                )
            ]
        )
        self._emitted = 0
        self._last_ms: int | None = None

    def tick(self, *, now: float) -> None:
        """`now` is wall-clock epoch seconds: it becomes the heartbeat's timestamp."""
        if EMIT_HEARTBEATS not in self._scheduler.due(now=now):
            return
        heartbeat = heartbeat_for(self.flow, now=now)
        self._sink.emit([heartbeat])
        self._emitted += 1
        self._last_ms = heartbeat.timestamp_ms

    def metrics(self) -> HeartbeatMetrics:
        return HeartbeatMetrics(heartbeats_emitted=self._emitted, last_heartbeat_ms=self._last_ms)

    def close(self) -> None:
        self._sink.close()
