"""/metrics rendered ahead of the scrape, as kafka-lag-exporter and Burrow serve what they polled last.

Reading every flow's, topic's and partition's figures costs a scrape about half a second of CPU at 500
flows or 20,000 partitions (docs/scale.md); done inside the web it holds that gunicorn process's other
requests meanwhile (one interpreter lock), every scrape. So while someone scrapes (a scrape within
`WANTED_FOR_S`), the metadata worker renders the families every METRICS_RENDER_INTERVAL_S
(`workers.exposition`) into Redis, and a scrape is answered with those bytes while they are younger than
METRICS_RENDER_MAX_AGE_S, with their age (`mirrorplane_metrics_age_seconds`, HTTP `Age`). Older, missing
(no metadata worker, a new install), or Redis away: the scrape reads the database itself, as with
METRICS_RENDER_INTERVAL_S=0. The key holds the database's name: installations sharing a Redis share nothing.
"""

from __future__ import annotations

import hashlib
import struct
import time

from django.conf import settings
from django.db import connection
from redis import RedisError

from controlplane.core.shared_redis import redis_client

REDIS_TIMEOUT_S = 2.0
WANTED_FOR_S = 600  # the worker renders for this long after the last scrape, then stops until the next
_STAMP = struct.Struct("!d")  # the stored value: when its reading started (epoch seconds), then the text

AGE_FAMILY = (
    "# HELP mirrorplane_metrics_age_seconds Seconds since this exposition's figures were read from the "
    "database (0: by this scrape; rendered ahead by the metadata worker while scraped, docs/metrics.md)\n"
    "# TYPE mirrorplane_metrics_age_seconds gauge\n"
    "mirrorplane_metrics_age_seconds {age}\n"
)


def _key(kind: str) -> str:
    database = hashlib.sha256(str(connection.settings_dict["NAME"]).encode()).hexdigest()[:16]
    return f"mirrorplane:metrics:{kind}:{database}"


def on() -> bool:
    return settings.METRICS_RENDER_INTERVAL_S > 0


def scraped() -> tuple[bytes, float] | None:
    """A scrape: note that someone scrapes (the worker renders while someone does) and hand out the
    families rendered ahead with their age in seconds, or None when there are none young enough (or Redis
    does not answer): then the scrape reads the database itself."""
    if not on():
        return None
    client = redis_client(timeout_s=REDIS_TIMEOUT_S)
    try:
        with client.pipeline(transaction=False) as pipeline:
            pipeline.set(_key("wanted"), b"1", ex=WANTED_FOR_S)
            pipeline.get(_key("exposition"))
            _, stored = pipeline.execute()
    except RedisError:
        return None
    if not isinstance(stored, bytes) or len(stored) < _STAMP.size:
        return None
    (read_at,) = _STAMP.unpack_from(stored)
    age_s = max(0.0, time.time() - read_at)
    if age_s > settings.METRICS_RENDER_MAX_AGE_S:
        return None
    return stored[_STAMP.size :], age_s


def wanted() -> bool:
    """Someone scraped within WANTED_FOR_S seconds."""
    return bool(redis_client(timeout_s=REDIS_TIMEOUT_S).exists(_key("wanted")))


def store(text: bytes, *, read_at: float) -> None:
    """The families read from the database from `read_at` (epoch seconds) on, for the scrapes to come."""
    ttl_s = max(1, int(settings.METRICS_RENDER_MAX_AGE_S) + 1)
    redis_client(timeout_s=REDIS_TIMEOUT_S).set(_key("exposition"), _STAMP.pack(read_at) + text, ex=ttl_s)


def age_family(age_s: float) -> str:
    return AGE_FAMILY.format(age=f"{age_s:.3f}")
