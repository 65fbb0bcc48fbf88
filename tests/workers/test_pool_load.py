"""What a worker weighs at a rebalance point (`workers.replication.pool_load`): the chains it holds, counted
as its presence and /metrics show them, against those of the other workers seen taking slices from the
chain's pool, in Redis (controlplane.core.presence)."""

from __future__ import annotations

import uuid

import pytest

from controlplane.core import presence
from workers import replication
from workers.plans import PoolLoad, TaskRef

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    """A pool queue of this test's own, and the presence keys it announced (withdrawn after)."""
    queue, keys = f"replication.pool-{uuid.uuid4().hex[:8]}", []

    def announce(name: str, queues: list[str], leases_held: int) -> None:
        key = presence.worker_key(name)
        keys.append(key)
        presence.announce(key=key, name=name, queues=queues, pid=1, stats={"leases_held": leases_held})

    yield queue, announce
    for key in keys:
        presence.withdraw(key=key)


def test_a_worker_weighs_its_chains_against_the_other_workers_of_the_pool_and_drops_those_it_offered(
    pool, monkeypatch
):
    queue, announce = pool
    for name in ("_WORKER_NAME", "_WORKER_QUEUES"):  # this process's, as it was (restored after)
        monkeypatch.setattr(replication, name, getattr(replication, name))
    me = f"me-{uuid.uuid4().hex[:8]}@test"
    replication.set_worker(name=me, queues=[queue])
    announce(me, [queue], 5)  # its own presence, stale: never counted among the others
    announce(f"idle-{me}", [queue, "metadata"], 0)
    announce(f"busy-{me}", [queue], 1)
    announce(f"elsewhere-{me}", ["replication.other"], 0)  # another pool's worker
    first, second = TaskRef(10_001, 0), TaskRef(10_001, 1)
    try:
        replication.STATS.chain_step(first, "chain-a", continues=True)
        replication.STATS.chain_step(second, "chain-b", continues=True)
        load = replication.pool_load(queue)
        assert load == PoolLoad(held=2, others=(1, 0))  # busy-, idle- (by name); not itself, not elsewhere-
        assert load.uneven()  # 2 against an idle worker: a chain moves
        # Its next slice went to the shared queue: no longer held here (its presence, /metrics).
        replication.chain_offered(second, "chain-b")
        assert replication.STATS.snapshot()["leases_held"] == 1
        assert not replication.pool_load(queue).uneven()
        # Taken again by this worker: held again. A lease lost: not held.
        replication.STATS.chain_step(second, "chain-b", continues=True)
        assert replication.pool_load(queue).held == 2
        replication.chain_ended(second, "chain-b")
        assert replication.STATS.snapshot()["leases_held"] == 1
    finally:
        replication.STATS.chain_step(first, "chain-a", continues=False)
        replication.STATS.chain_step(second, "chain-b", continues=False)
