"""Redis clients shared by a process's threads: one client, and its connection pool, per Redis URL and
timeout. A request reads Redis over connections kept open, never over one opened and closed per read
(a TCP handshake each time, two of them per page for the workers' presence)."""

from __future__ import annotations

import threading

import redis
from django.conf import settings

_lock = threading.Lock()
_clients: dict[tuple[str, float], redis.Redis] = {}


def redis_client(*, timeout_s: float) -> redis.Redis:
    """REDIS_URL's shared client whose connects and reads give up after `timeout_s`."""
    key = (settings.REDIS_URL, timeout_s)
    with _lock:
        if key not in _clients:
            _clients[key] = redis.Redis.from_url(
                key[0], socket_connect_timeout=timeout_s, socket_timeout=timeout_s
            )
        return _clients[key]
