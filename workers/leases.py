"""Leases in Redis: at most one task chain per (flow, task index), taken over when its holder dies.

A lease is a key holding its holder's token, with a TTL. `try_acquire` is SET NX PX (the supervisor
starting a chain); `hold` acquires-or-renews in one Lua script (a chain's slice: renew if the token is
ours, take it if the key is gone, e.g. after a Redis restart, fail if another token holds it);
`release` deletes only if the token is ours; `transfer` gives a lease we hold to a new token in one step
(a stopping worker handing its chain over, once the successor said it is ready: `announce_ready`). A killed worker stops renewing, so its leases expire after
the TTL and the supervisor starts new chains elsewhere. `LeaseKeeper` renews in a background thread
while a slice runs, so a slice longer than the TTL (a slow target) keeps its lease.

Each flow's generation fencing (`replication.generations.Fencing`, `fencing_key`) lives here too, with
the lock the worker that fences holds (`workers.fencing`).

The flow plans (`workers.plans.FlowPlan`) live here too: runtime state, rebuilt by the metadata tasks.
Each is stored with a digest of its content (`plan_version_key`), written together with it, so that a
slice learns whether its flow's plan changed from one short key (`RedisLeases.plan`) instead of reading
and parsing the whole plan (tens of kilobytes at thousands of partitions) every slice.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator

import redis
from redis.lock import Lock

from replication.generations import Fencing
from workers.plans import FlowPlan, TaskRef

log = logging.getLogger(__name__)

PREFIX = "mirrorplane"
# A plan kept by a process is read whole again at least this often whatever its version says: a writer
# that does not store versions (a worker of an older release, during a rolling upgrade) is followed too.
PLAN_REREAD_S = 60.0

_HOLD = """
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if current == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


_TRANSFER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""


def new_token() -> str:
    return uuid.uuid4().hex


def task_lease_key(task: TaskRef) -> str:
    return f"{PREFIX}:lease:flow:{task.flow_id}:task:{task.task_index}"


def ready_key(lease_key: str) -> str:
    """Where the successor of a chain being handed over says its clients are ready."""
    return f"{lease_key}:successor-ready"


def metadata_lease_key(flow_id: int) -> str:
    return f"{PREFIX}:lease:flow:{flow_id}:metadata"


def plan_key(flow_id: int) -> str:
    return f"{PREFIX}:plan:flow:{flow_id}"


def plan_version_key(flow_id: int) -> str:
    return f"{plan_key(flow_id)}:version"


def fencing_key(flow_id: int) -> str:
    return f"{PREFIX}:fencing:flow:{flow_id}"


def plan_version(text: str) -> str:
    """A stored plan's version: a digest of its JSON, so rewriting the same plan changes nothing."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class RedisLeases:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._hold = client.register_script(_HOLD)
        self._release = client.register_script(_RELEASE)
        self._transfer = client.register_script(_TRANSFER)
        self._plans: dict[int, tuple[bytes, float, FlowPlan]] = {}  # flow -> (version, read at, plan)
        self._saved: dict[int, tuple[bytes, FlowPlan]] = {}  # flow -> (version, plan) this process stored

    @classmethod
    def from_url(cls, url: str) -> RedisLeases:
        return cls(
            redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=10)
        )

    def try_acquire(self, key: str, token: str, *, ttl_s: float) -> bool:
        return bool(self.client.set(key, token, nx=True, px=_ms(ttl_s)))

    def hold(self, key: str, token: str, *, ttl_s: float) -> bool:
        """Renew our lease, or take it if nobody holds it; False when another token holds it."""
        return bool(self._hold(keys=[key], args=[token, _ms(ttl_s)]))

    def release(self, key: str, token: str) -> bool:
        return bool(self._release(keys=[key], args=[token]))

    def transfer(self, key: str, token: str, new_token: str, *, ttl_s: float) -> bool:
        """Give our lease to `new_token` (a new chain); False when `token` no longer holds it."""
        return bool(self._transfer(keys=[key], args=[token, new_token, _ms(ttl_s)]))

    def announce_ready(self, key: str, token: str, *, ttl_s: float) -> None:
        """The chain `token`, successor of the holder of lease `key`, is ready to take it."""
        self.client.set(ready_key(key), token, px=_ms(ttl_s))

    def is_ready(self, key: str, token: str) -> bool:
        value = self.client.get(ready_key(key))
        return value is not None and value.decode() == token

    def holders(self, keys: list[str]) -> list[str | None]:
        values = self.client.mget(keys) if keys else []
        return [None if value is None else value.decode() for value in values]

    # -- flow plans ----------------------------------------------------------------------------------
    def save_plan(self, flow_id: int, plan: FlowPlan) -> None:
        """Store the flow's plan; the one this process stored last, still stored (one GET of its version),
        is not written again: its JSON is about 100 KB at 5,000 partitions, and the metadata task saves
        the plan at every tick."""
        saved = self._saved.get(flow_id)
        if saved is not None and saved[1] == plan and self.client.get(plan_version_key(flow_id)) == saved[0]:
            return
        text = plan.to_json()
        version = plan_version(text)
        with self.client.pipeline(transaction=True) as both:  # MULTI: a reader sees both or neither
            both.set(plan_key(flow_id), text).set(plan_version_key(flow_id), version).execute()
        self._saved[flow_id] = (version.encode(), plan)

    def plan(self, flow_id: int) -> FlowPlan | None:
        """The flow's plan (None: none stored), as `plans` reads it."""
        return self.plans([flow_id])[flow_id]

    def plans(self, flow_ids: list[int]) -> dict[int, FlowPlan | None]:
        """The flows' plans (None: none stored). A plan is read and parsed again only when its stored
        version differs from the one this process holds (or PLAN_REREAD_S passed): otherwise one MGET of
        the versions for all of them (the supervisor asks every few seconds, the slices every slice)."""
        if not flow_ids:
            return {}
        now = time.monotonic()
        found: dict[int, FlowPlan | None] = {}
        versions = self.client.mget([plan_version_key(flow_id) for flow_id in flow_ids])
        for flow_id, version in zip(flow_ids, versions, strict=True):
            kept = self._plans.get(flow_id)
            if (
                kept is not None
                and version is not None
                and kept[0] == version
                and now - kept[1] < PLAN_REREAD_S
            ):
                found[flow_id] = kept[2]
        wanted = [flow_id for flow_id in flow_ids if flow_id not in found]
        if wanted:  # text and version in one MGET: a plan written meanwhile comes with its own version
            values = self.client.mget([key for f in wanted for key in (plan_key(f), plan_version_key(f))])
            for index, flow_id in enumerate(wanted):
                found[flow_id] = self._parsed(flow_id, values[2 * index], values[2 * index + 1], now=now)
        return {flow_id: found[flow_id] for flow_id in flow_ids}

    def _parsed(
        self, flow_id: int, text: bytes | None, version: bytes | None, *, now: float
    ) -> FlowPlan | None:
        if text is None:
            self._plans.pop(flow_id, None)
            return None
        plan = FlowPlan.from_json(text)
        if version is None:  # written without a version: read whole each time
            self._plans.pop(flow_id, None)
        else:
            self._plans[flow_id] = (version, now, plan)
        return plan

    def delete_plan(self, flow_id: int) -> None:
        self._saved.pop(flow_id, None)
        self.client.delete(plan_key(flow_id), plan_version_key(flow_id))

    # -- generation fencing (replication.generations) -------------------------------------------------
    def fencing(self, flow_id: int) -> Fencing | None:
        text = self.client.get(fencing_key(flow_id))
        return None if text is None else Fencing.from_json(text)

    def save_fencing(self, flow_id: int, fencing: Fencing) -> None:
        self.client.set(fencing_key(flow_id), fencing.to_json())

    def fencing_lock(self, flow_id: int, *, timeout_s: float) -> Lock:
        """Held by the one worker that fences the flow's earlier generations (expires if it dies)."""
        return self.client.lock(f"{fencing_key(flow_id)}:lock", timeout=timeout_s, blocking=False)

    def forget_flow(self, flow_id: int) -> None:
        """A deleted flow: its plan and its fencing go."""
        self._saved.pop(flow_id, None)
        self.client.delete(plan_key(flow_id), plan_version_key(flow_id), fencing_key(flow_id))


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class LeaseKeeper:
    """Renews a lease every third of its TTL while a slice runs; `lost` is set when renewal was refused.

    A Redis outage is not a loss: renewal is retried, and the lease key, if Redis lost it, is taken
    again by `hold`. A context manager: the thread stops on exit.
    """

    def __init__(self, leases: RedisLeases, key: str, token: str, *, ttl_s: float) -> None:
        self._leases, self._key, self._token, self._ttl_s = leases, key, token, ttl_s
        self._done = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-keeper {key}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self._ttl_s / 3):
            try:
                if not self._leases.hold(self._key, self._token, ttl_s=self._ttl_s):
                    log.warning("lease %s was taken over by another worker", self._key)
                    self.lost.set()
                    return
            except redis.RedisError as exc:
                log.warning("renewing lease %s failed (retrying): %s", self._key, exc)


@contextlib.contextmanager
def one_at_a_time(leases: RedisLeases, name: str, *, ttl_s: float) -> Iterator[bool]:
    """Whether this process runs `name` now: True while it holds the run's lease (renewed by a
    `LeaseKeeper`, so a run longer than `ttl_s` stays the only one; a killed process's lease expires after
    `ttl_s`), False when another process's run holds it. Released on exit with our token only, so a run
    never ends another's. For periodic tasks several workers may hold queued copies of (verification, alert
    evaluation): at 20,000 partitions a verification run outlasted a fixed 60 s key and the next run went
    on beside it over the same partitions."""
    key, token = f"{PREFIX}:run:{name}", new_token()
    if not leases.try_acquire(key, token, ttl_s=ttl_s):
        yield False
        return
    try:
        with LeaseKeeper(leases, key, token, ttl_s=ttl_s):
            yield True
    finally:
        leases.release(key, token)
