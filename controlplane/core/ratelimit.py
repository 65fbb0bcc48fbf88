"""Per-user rate limits for requests that cost the clusters (a failover plan opens clients on both).

Counts live in Django's cache, which is Redis (settings.CACHES), so every gunicorn worker shares them.
A fixed window per (scope, user): simple, and enough to keep a held-down refresh key or a script from
opening hundreds of Kafka clients a minute. When the cache does not answer the limit is not applied
(logged): an unreachable Redis must not also take the failover plan away during an incident.
"""

from __future__ import annotations

import logging
import time

from django.core.cache import cache

from controlplane.core.errors import RateLimited

log = logging.getLogger(__name__)


def hit(*, scope: str, user_id: int | None, limit: int, window_s: int, now: float | None = None) -> None:
    """Count one request of `user_id` in `scope`; RateLimited past `limit` in the current window."""
    if user_id is None or limit <= 0:
        return  # the command line (the system) is not limited; 0 turns the limit off
    moment = time.time() if now is None else now
    window = int(moment // window_s)
    key = f"ratelimit:{scope}:{user_id}:{window}"
    try:
        cache.add(key, 0, timeout=window_s + 1)
        count = cache.incr(key)
    except Exception:  # any cache failure: fail open, loudly
        log.warning("rate limit %s not applied: the cache did not answer", scope, exc_info=True)
        return
    if count > limit:
        retry_after_s = max(1, int((window + 1) * window_s - moment))
        raise RateLimited(
            f"at most {limit} {scope.replace('_', ' ')} request(s) per {window_s} s per user: "
            f"try again in {retry_after_s} s",
            retry_after_s=retry_after_s,
        )
