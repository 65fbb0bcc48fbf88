"""Answers shared for a moment: what many clients ask for at once (the flows list, as a page and in the API;
a flow's status API and its page's live refresh, which an on-call team watches together) is built once per
MIRRORPLANE_SHARED_ANSWER_S seconds (2 by default; 0: never shared) and per configuration generation for
every process of the web (Redis, through the process's shared client), and handed out with the moment
it was built.

A change to the configuration (a flow or a cluster saved or deleted, a flow's state changed: `bump`, on
commit) starts a new generation, so whoever made it, and everybody else, sees it on their next request:
only what the workers report (positions, lag, alerts) can be those seconds old, and the answer says when it
was built. Without Redis every request builds its own answer (a cache is never a reason to fail one).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import pickle
import time
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from redis import RedisError

from controlplane.core.shared_redis import redis_client

log = logging.getLogger(__name__)
T = TypeVar("T")

GENERATION_KEY = "mirrorplane:microcache:generation"
REDIS_TIMEOUT_S = 2.0


def bump() -> None:
    """The configuration changed: answers built before are not handed out again. Runs when the current
    transaction commits (a request that read before the commit, and stored after it, stored the old
    generation's answer)."""
    transaction.on_commit(_new_generation)


def _new_generation() -> None:
    try:
        redis_client(timeout_s=REDIS_TIMEOUT_S).set(GENERATION_KEY, time.time_ns())
    except RedisError as error:  # the cache is down: nothing is handed out of it either
        log.warning("microcache: could not start a new generation: %s", error)


def shared(name: str, parts: tuple, build: Callable[[], T]) -> tuple[T, datetime]:
    """`build()`'s answer for (`name`, `parts`), built at most once per MIRRORPLANE_SHARED_ANSWER_S seconds
    and generation by any process, and when it was built. `parts` is everything the answer depends on
    besides the stored state (the full URL, the viewer's role); `build` raising stores nothing. Redis
    through the process's shared client (one connection pool; Django's cache makes a client per call)."""
    seconds = settings.MIRRORPLANE_SHARED_ANSWER_S
    if seconds <= 0:
        return build(), timezone.now()
    # The database is part of the key: two installations (or test databases) sharing a Redis share nothing.
    identity = repr((connection.settings_dict["NAME"], parts)).encode()
    key = f"mirrorplane:microcache:{name}:{hashlib.sha256(identity).hexdigest()}"
    client = redis_client(timeout_s=REDIS_TIMEOUT_S)
    try:
        generation, stored = client.mget([GENERATION_KEY, key])
    except RedisError:
        return build(), timezone.now()
    if isinstance(stored, bytes):  # (the client decodes nothing: bytes or None)
        stored_generation, answer, built_at = pickle.loads(stored)
        if stored_generation == generation:
            return answer, built_at
    built_at = timezone.now()
    answer = build()
    entry = pickle.dumps((generation, answer, built_at), pickle.HIGHEST_PROTOCOL)
    with contextlib.suppress(RedisError):  # handed out all the same; the next request builds its own
        client.set(key, entry, px=seconds * 1000)
    return answer, built_at


def age_header(built_at: datetime) -> dict[str, str]:
    """HTTP's `Age` of an answer built at `built_at`: whole seconds (RFC 9111 5.1)."""
    return {"Age": str(max(0, int((timezone.now() - built_at).total_seconds())))}
