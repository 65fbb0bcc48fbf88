"""Per-user rate limits for requests that cost the clusters (a failover plan opens clients on both).

Counts live in Django's cache, which is Redis (settings.CACHES), so every gunicorn worker shares them.
A sliding window per (scope, user), counted the way a fixed window is (one counter per window) and
weighted: the previous window's count counts for the share of it still inside the last `window_s`
seconds. A fixed window alone lets a burst straddling its edge through twice over (the limit at 11:59:59,
the limit again at 12:00:00); this one does not, at the cost of two cache reads. Only accepted requests
count, so a refresh key held down during an incident is refused but does not push the retry further away.
When the cache does not answer the limit is not applied (logged): an unreachable Redis must not also take
the failover plan away during an incident.
"""

from __future__ import annotations

import logging
import math
import time

from django.core.cache import cache

from controlplane.core.errors import RateLimited

log = logging.getLogger(__name__)


def hit(*, scope: str, user_id: int | None, limit: int, window_s: int, now: float | None = None) -> None:
    """Count one request of `user_id` in `scope`; RateLimited past `limit` in the last `window_s`."""
    if user_id is None or limit <= 0:
        return  # the command line (the system) is not limited; 0 turns the limit off
    moment = time.time() if now is None else now
    window = int(moment // window_s)
    key = f"ratelimit:{scope}:{user_id}:{{}}"
    try:
        cache.add(key.format(window), 0, timeout=2 * window_s + 1)
        count = cache.incr(key.format(window))
        previous = int(cache.get(key.format(window - 1)) or 0)
        elapsed = moment - window * window_s
        if previous * (1 - elapsed / window_s) + count <= limit:
            return
        cache.decr(key.format(window))  # refused: it does not count
    except Exception:  # any cache failure: fail open, loudly
        log.warning("rate limit %s not applied: the cache did not answer", scope, exc_info=True)
        return
    retry_after_s = _retry_after_s(
        previous=previous, accepted=count - 1, limit=limit, elapsed=elapsed, window_s=window_s
    )
    raise RateLimited(
        f"at most {limit} {scope.replace('_', ' ')} request(s) per {window_s} s per user: "
        f"try again in {retry_after_s} s",
        retry_after_s=retry_after_s,
    )


def _retry_after_s(*, previous: int, accepted: int, limit: int, elapsed: float, window_s: int) -> int:
    """Seconds until one more request fits: the previous window's weight has to fall far enough."""
    room = limit - accepted - 1  # what the previous window may still weigh for one more to fit
    if room >= 0 and previous > 0:
        wait = window_s * (1 - room / previous) - elapsed
    else:  # this window is full: in the next one, this window is the previous
        wait = (window_s - elapsed) + (window_s * (1 - (limit - 1) / accepted) if accepted else 0)
    return max(1, math.ceil(wait))
