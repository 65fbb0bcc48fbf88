"""Warnings about a standing condition (a cluster without an authorizer, a replication factor lowered to
the broker count) logged once per process instead of at every sync, so INFO tells a story."""

from __future__ import annotations

import logging
import threading

_MAX_REMEMBERED = 10_000  # distinct messages; past it they are logged again rather than kept forever

_seen: set[tuple[str, str]] = set()
_lock = threading.Lock()


def first_time(*, logger_name: str, text: str) -> bool:
    """True the first time this process asks about (logger_name, text), False afterwards."""
    key = (logger_name, text)
    with _lock:
        if key in _seen:
            return False
        if len(_seen) >= _MAX_REMEMBERED:
            _seen.clear()
        _seen.add(key)
        return True


def warn_once(logger: logging.Logger, message: str, *args: object) -> None:
    """`logger.warning(message, *args)` the first time this process logs that text on that logger; the
    repeats go to DEBUG (still there with LOG_LEVEL=DEBUG)."""
    text = message % args if args else message
    level = logging.WARNING if first_time(logger_name=logger.name, text=text) else logging.DEBUG
    logger.log(level, message, *args)
