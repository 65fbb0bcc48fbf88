"""This worker process announces itself (controlplane.core.presence) from start to a clean stop.

A daemon thread writes the worker's presence every MIRRORPLANE_PRESENCE_INTERVAL_S; it keeps trying
while Redis is away (the key simply expires meanwhile: the worker is not seen, which is the truth
readers need).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from django.conf import settings

from controlplane.core import presence
from workers import replication

log = logging.getLogger(__name__)


class PresenceAnnouncer:
    def __init__(self, *, hostname: str, queues: list[str]) -> None:
        self.key = presence.worker_key(hostname)
        self.hostname, self.queues = hostname, queues
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mirrorplane-presence", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        previous = (time.monotonic(), 0)
        while not self._stop.is_set():
            try:
                stats = replication.STATS.snapshot()
                now = time.monotonic()
                # Slices per second since the last announcement (the pools page shows it).
                stats["slices_per_s"] = round(
                    (stats["slices"] - previous[1]) / max(now - previous[0], 1e-3), 2
                )
                previous = (now, stats["slices"])
                presence.announce(
                    key=self.key,
                    name=self.hostname,
                    queues=self.queues,
                    pid=os.getpid(),
                    stats=stats,
                )
            except Exception as exc:  # Redis away: not seen until it is back
                log.warning("presence not announced (retrying): %s", exc)
            self._stop.wait(settings.MIRRORPLANE_PRESENCE_INTERVAL_S)

    def stop(self) -> None:
        self._stop.set()
        try:
            presence.withdraw(key=self.key)
        except Exception as exc:
            log.warning("presence not withdrawn (it expires on its own): %s", exc)


_ANNOUNCER: PresenceAnnouncer | None = None


def start(*, hostname: str, queues: list[str]) -> None:
    global _ANNOUNCER
    if _ANNOUNCER is None:
        _ANNOUNCER = PresenceAnnouncer(hostname=hostname, queues=queues)
        _ANNOUNCER.start()


def stop() -> None:
    global _ANNOUNCER
    if _ANNOUNCER is not None:
        _ANNOUNCER.stop()
        _ANNOUNCER = None


def others_consume(queue: str) -> bool:
    """Whether a worker other than this one is seen taking slices from `queue`; True when Redis cannot
    tell (a stopping worker then waits for a successor, as it would for one it cannot see)."""
    own = _ANNOUNCER.hostname if _ANNOUNCER is not None else None
    try:
        return bool(presence.others_consuming(queue, own=own))
    except Exception as exc:  # Redis away
        log.warning("workers not seen (a successor is assumed): %s", exc)
        return True
