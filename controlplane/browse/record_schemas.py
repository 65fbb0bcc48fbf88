"""The message browser reads records in the Confluent wire format with the cluster's schema registry
(`replication.schemas.decoding`), asking it little and never for long.

- A schema never changes once registered (its ID, a subject's version), so each web process keeps the
  schemas it read (`SchemaCache`: at most SCHEMA_CACHE_CHARS of schema text, least recently used out
  first): a page of 500 records written with a few schemas costs the registry a few requests once.
- A page asks the registry at most MAX_LOOKUPS_PER_PAGE times, each call bounded by what is left of the
  request's time for outbound calls (`controlplane.core.call_bounds`, shared with its Kafka reads).
- A registry that did not answer opens its breaker for every web process (`call_bounds.breaker_allow`): pages
  show records as bytes at once until the trial lookup succeeds.
After the first refusal (a bound, the deadline, the breaker, an error) the page asks no more: each record
not decoded says why, and the page says it once (`PageRegistry.note`). A cluster without a registry
decodes nothing.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from controlplane.core import call_bounds
from controlplane.core.errors import ClusterUnavailable
from controlplane.core.outbound import outbound_hosts
from controlplane.flows import engine
from controlplane.flows.models import Cluster
from replication.schemas.decoding import Decoded, decode_record
from replication.schemas.flow import registry_client
from replication.schemas.rest import ConfluentRegistryClient, RegistryError, Schema

Decoder = Callable[[bytes | None], Decoded]

MAX_LOOKUPS_PER_PAGE = 20
SCHEMA_CACHE_CHARS = 16 << 20


class SchemaCache:
    """Registry answers that never change (a schema by ID, a subject's version), least recently used out
    first once their schema text passes `max_chars`; shared by the threads of a process, which ask the
    registry for one key one at a time (`claim`): parallel pages of the same records make one lookup."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._chars = 0
        self._asking: dict[tuple, threading.Event] = {}
        self._lock = threading.Lock()

    def claim(self, key: tuple) -> threading.Event | None:
        """None: this thread asks the registry for `key`, then calls `release(key)`; else the lookup another
        thread makes, to wait for."""
        with self._lock:
            if key in self._asking:
                return self._asking[key]
            self._asking[key] = threading.Event()
            return None

    def release(self, key: tuple) -> None:
        with self._lock:
            self._asking.pop(key).set()

    def get(self, key: tuple) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: tuple, value: Any, *, chars: int) -> None:
        with self._lock:
            if key in self._entries or chars > self.max_chars:
                return
            self._entries[key] = (value, chars)
            self._chars += chars
            while self._chars > self.max_chars:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._chars -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0


schema_cache = SchemaCache(SCHEMA_CACHE_CHARS)


class PageStopped(Exception):
    """The page asks the registry no more (why: a bound, the deadline, the breaker, the registry's error)."""


class PageRegistry:
    """A registry as one page reads it, a decoder of the page's payloads: answers kept (every process's
    cache first), at most MAX_LOOKUPS_PER_PAGE calls, and after the first refusal no more calls."""

    def __init__(self, client: ConfluentRegistryClient) -> None:
        self.client = client
        self.breaker_key = "registry:" + hashlib.sha256(client.url.encode()).hexdigest()[:32]
        self.answers: dict[tuple, Any] = {}  # this page's, with the IDs the registry does not have
        self.lookups = 0
        self.stopped: PageStopped | None = None

    def __call__(self, payload: bytes | None) -> Decoded:
        return decode_record(payload, self)

    @property
    def note(self) -> str | None:
        """Why some records of the page may not be decoded, once for the page."""
        return None if self.stopped is None else f"records not decoded past this point: {self.stopped}"

    def _stop(self, reason: str) -> PageStopped:
        self.stopped = PageStopped(reason)
        return self.stopped

    def _ask(self, key: tuple, ask: Callable[[], Any], chars: Callable[[Any], int]) -> Any:
        if key in self.answers:
            return self.answers[key]
        shared_key = (self.client.url, *key)
        if (cached := schema_cache.get(shared_key)) is not None:
            return cached
        self._may_ask()
        if (asking := schema_cache.claim(shared_key)) is not None:  # another page of this process asks it
            asking.wait(max(call_bounds.remaining_s(), 0))
            if (cached := schema_cache.get(shared_key)) is not None:
                return cached
            return self._lookup(key, ask, chars)
        try:
            return self._lookup(key, ask, chars)
        finally:
            schema_cache.release(shared_key)

    def _may_ask(self) -> None:
        if self.stopped is not None:
            raise self.stopped
        if self.lookups >= MAX_LOOKUPS_PER_PAGE:
            raise self._stop(
                f"this page asked the schema registry of {self.client.name} {MAX_LOOKUPS_PER_PAGE} times, "
                "the most a page asks; the next pages find what it read"
            )
        if (state := call_bounds.breaker_allow(self.breaker_key, now=time.time())) is not None:
            raise self._stop(
                f"the schema registry of {self.client.name} did not answer ({state.last_error}); it is "
                f"asked again in {max(state.retry_at - time.time(), 0):.0f} s. Check its schema.registry.url"
            )

    def _lookup(self, key: tuple, ask: Callable[[], Any], chars: Callable[[Any], int]) -> Any:
        try:
            self.client.timeout_s = call_bounds.timeout_s(f"the schema registry of {self.client.name}")
        except ClusterUnavailable as exc:
            raise self._stop(str(exc)) from None
        self.lookups += 1
        try:
            answer = ask()
        except RegistryError as exc:
            unanswered = (
                exc.status == 0 and not exc.not_asked and call_bounds.had_fair_time(self.client.timeout_s)
            )
            if unanswered or exc.status >= 500:
                call_bounds.breaker_record(self.breaker_key, error=str(exc), now=time.time())
            raise self._stop(f"the schema registry of {self.client.name} failed: {exc}") from None
        call_bounds.breaker_record(self.breaker_key, error=None, now=time.time())
        self.answers[key] = answer
        if answer is not None:
            schema_cache.put((self.client.url, *key), answer, chars=chars(answer))
        return answer

    def schema_by_id(self, schema_id: int) -> Schema | None:
        return self._ask(
            ("id", schema_id), lambda: self.client.schema_by_id(schema_id), lambda schema: len(schema.schema)
        )

    def version(self, subject: str, version: int) -> Any:
        return self._ask(
            ("version", subject, version),
            lambda: self.client.version(subject, version),
            lambda found: len(found.schema.schema) + len(subject),
        )


def record_decoder(cluster: Cluster) -> PageRegistry | None:
    """A decoder of this page's records with `cluster`'s registry; None when it has none."""
    config = engine.cluster_to_config(cluster)
    if not config.schema_registry().get("url"):
        return None
    return PageRegistry(registry_client(config, allowlist=outbound_hosts()))
