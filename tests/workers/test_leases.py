"""Leases against the real Redis: one holder, renewal, expiry and takeover, token-checked release."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import redis

from replication.generations import Fencing
from workers.leases import LeaseKeeper, RedisLeases, new_token, one_at_a_time, plan_key, task_lease_key
from workers.plans import FlowPlan, TaskRef

KEY = task_lease_key(TaskRef(1, 0))


@pytest.fixture
def leases(redis_url) -> RedisLeases:
    return RedisLeases.from_url(redis_url)


def _wait_expired(leases: RedisLeases, key: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while leases.holders([key]) != [None]:
        assert time.monotonic() < deadline, "lease did not expire"
        time.sleep(0.02)


def test_only_one_holder(leases):
    first, second = new_token(), new_token()
    assert leases.try_acquire(KEY, first, ttl_s=10)
    assert not leases.try_acquire(KEY, second, ttl_s=10)
    assert leases.hold(KEY, first, ttl_s=10)
    assert not leases.hold(KEY, second, ttl_s=10)
    assert leases.holders([KEY]) == [first]


def test_a_transfer_gives_the_lease_to_a_new_chain_only_from_its_holder(leases):
    holder, successor, stranger = new_token(), new_token(), new_token()
    leases.try_acquire(KEY, holder, ttl_s=10)
    assert not leases.transfer(KEY, stranger, new_token(), ttl_s=10)
    assert leases.transfer(KEY, holder, successor, ttl_s=10)
    assert leases.holders([KEY]) == [successor]
    assert not leases.hold(KEY, holder, ttl_s=10)  # the old chain's late slice ends
    assert not leases.transfer(KEY, holder, new_token(), ttl_s=10)  # a chain is handed over once


def test_release_needs_the_token(leases):
    holder = new_token()
    leases.try_acquire(KEY, holder, ttl_s=10)
    assert not leases.release(KEY, new_token())
    assert leases.holders([KEY]) == [holder]
    assert leases.release(KEY, holder)
    assert leases.holders([KEY]) == [None]


def test_expired_lease_is_taken_over_and_the_old_holder_cannot_renew(leases):
    old, new = new_token(), new_token()
    leases.try_acquire(KEY, old, ttl_s=0.2)
    _wait_expired(leases, KEY)
    assert leases.try_acquire(KEY, new, ttl_s=10)
    assert not leases.hold(KEY, old, ttl_s=10)
    assert not leases.release(KEY, old)
    assert leases.holders([KEY]) == [new]


def test_hold_takes_a_lease_nobody_holds(leases):
    """After a Redis restart the key is gone: the running chain takes it again."""
    token = new_token()
    assert leases.hold(KEY, token, ttl_s=10)
    assert leases.holders([KEY]) == [token]


def test_hold_renews_the_ttl(leases):
    token = new_token()
    leases.try_acquire(KEY, token, ttl_s=0.3)
    assert leases.hold(KEY, token, ttl_s=30)
    assert leases.client.pttl(KEY) > 10_000


def test_keeper_keeps_a_lease_alive_past_its_ttl(leases):
    token = new_token()
    leases.try_acquire(KEY, token, ttl_s=0.3)
    with LeaseKeeper(leases, KEY, token, ttl_s=0.3) as keeper:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # three TTLs: it would have expired without the keeper
            assert leases.holders([KEY]) == [token]
            time.sleep(0.05)
    assert not keeper.lost.is_set()


def test_keeper_reports_a_lost_lease(leases):
    token = new_token()
    leases.try_acquire(KEY, token, ttl_s=0.3)
    leases.client.set(KEY, "another-chain")
    with LeaseKeeper(leases, KEY, token, ttl_s=0.3) as keeper:
        assert keeper.lost.wait(2.0)


def test_plans_are_stored_per_flow(leases):
    plan = FlowPlan("v1", (("orders", 0), ("orders", 1)))
    leases.save_plan(7, plan)
    assert leases.plans([7, 8]) == {7: plan, 8: None}
    leases.delete_plan(7)
    assert leases.plans([7]) == {7: None}


def test_fencing_is_stored_per_flow_one_worker_fences_and_a_deleted_flow_forgets_it(leases):
    fencing = Fencing("0123456789abcdef", task_ids=3, fenced=True)
    leases.save_plan(7, FlowPlan("v1", (("orders", 0),)))
    leases.save_fencing(7, fencing)
    assert leases.fencing(7) == fencing and leases.fencing(8) is None
    held = leases.fencing_lock(7, timeout_s=5)
    assert held.acquire()
    assert not leases.fencing_lock(7, timeout_s=5).acquire()  # another worker waits
    assert leases.fencing_lock(8, timeout_s=5).acquire()  # another flow does not
    held.release()
    leases.forget_flow(7)
    assert leases.fencing(7) is None and leases.plans([7]) == {7: None}


class CountingRedis(redis.Redis):
    """A real Redis client that counts the commands it sends, by name."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent: Counter = Counter()

    def execute_command(self, *args, **options):
        self.sent[str(args[0]).upper()] += 1
        return super().execute_command(*args, **options)


def test_a_slice_reads_and_parses_its_plan_again_only_when_it_changed(redis_url):
    client = CountingRedis.from_url(redis_url)
    leases, writer = RedisLeases(client), RedisLeases.from_url(redis_url)
    plan = FlowPlan("v1", tuple(("orders", p) for p in range(5_000)))
    writer.save_plan(9, plan)
    first = leases.plan(9)
    assert first == plan and first.task_partitions(4) is first.task_partitions(4)  # assigned once
    client.sent.clear()
    for _ in range(10):
        assert leases.plan(9) is first  # neither read nor parsed again: its version is checked
    assert client.sent == Counter({"MGET": 10})
    writer.save_plan(9, plan)  # the same plan again: the same version
    assert leases.plan(9) is first
    grown = FlowPlan("v1", (*plan.partitions, ("orders", 5_000)))
    writer.save_plan(9, grown)
    assert leases.plan(9) == grown
    writer.delete_plan(9)
    assert leases.plan(9) is None
    writer.client.set(plan_key(9), plan.to_json())  # only a writer without versions: read whole each time
    assert leases.plan(9) == plan and leases.plan(9) is not leases.plan(9)
    writer.delete_plan(9)


def test_one_run_at_a_time_holds_past_its_ttl_and_releases_only_its_own(leases):
    key = "mirrorplane:run:test-run"
    with one_at_a_time(leases, "test-run", ttl_s=0.3) as first:
        assert first
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # three TTLs: a fixed key would have let a second run in
            with one_at_a_time(leases, "test-run", ttl_s=0.3) as second:
                assert not second
            time.sleep(0.05)
    assert leases.holders([key]) == [None]
    with one_at_a_time(leases, "test-run", ttl_s=0.3) as again:
        assert again
        leases.client.set(key, "another-run")  # its lease taken meanwhile (e.g. Redis lost it)
    assert leases.holders([key]) == ["another-run"]  # not released by the run that lost it


def test_the_supervisor_reads_every_plan_in_one_request_and_parses_only_changed_ones(redis_url):
    client = CountingRedis.from_url(redis_url)
    leases, writer = RedisLeases(client), RedisLeases.from_url(redis_url)
    big, small = FlowPlan("v1", tuple(("orders", p) for p in range(5_000))), FlowPlan("v1", (("t", 0),))
    writer.save_plan(11, big)
    writer.save_plan(12, small)
    first = leases.plans([11, 12, 13])
    assert first == {11: big, 12: small, 13: None}
    client.sent.clear()
    again = leases.plans([11, 12])
    assert again[11] is first[11] and again[12] is first[12]
    assert client.sent == Counter({"MGET": 1})  # the versions only: nothing read or parsed again
    # (a flow without a versioned plan is read whole: none yet, or one a worker of an older release wrote)
    grown = FlowPlan("v2", (("t", 0), ("t", 1)))
    writer.save_plan(12, grown)
    client.sent.clear()
    changed = leases.plans([11, 12])
    assert changed[11] is first[11] and changed[12] == grown
    assert client.sent == Counter({"MGET": 2})  # the versions, then the changed plan with its version
    writer.forget_flow(11)
    writer.forget_flow(12)


def test_saving_the_same_plan_again_writes_nothing_unless_it_is_gone(redis_url):
    client = CountingRedis.from_url(redis_url)
    writer, reader = RedisLeases(client), RedisLeases.from_url(redis_url)
    plan = FlowPlan("v1", tuple(("orders", p) for p in range(5_000)))
    writer.save_plan(14, plan)
    client.sent.clear()
    for _ in range(5):  # every metadata tick
        writer.save_plan(14, FlowPlan("v1", tuple(plan.partitions)))
    assert client.sent == Counter({"GET": 5})  # its version, checked: still stored
    reader.delete_plan(14)  # a fault deleted it (another process), or Redis restarted
    writer.save_plan(14, plan)
    assert reader.plan(14) == plan
    writer.save_plan(14, FlowPlan("v2", plan.partitions))  # a new config version: written
    assert reader.plan(14) == FlowPlan("v2", plan.partitions)
    writer.forget_flow(14)
