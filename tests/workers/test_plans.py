"""The runtime's pure decisions: tasks per flow, what a slice does, cache validity, backoff, stickiness."""

from __future__ import annotations

import pytest

from workers.plans import (
    ChainPosition,
    FlowPlan,
    PoolLoad,
    RunnableFlow,
    SliceAction,
    TaskRef,
    backoff_s,
    cached_task_is_current,
    decide_slice,
    desired_tasks,
    stays_on_worker,
)

PARTITIONS = (("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0))


def test_plan_round_trips_through_json():
    plan = FlowPlan("v1", PARTITIONS)
    assert FlowPlan.from_json(plan.to_json()) == plan


def test_desired_tasks_are_min_of_tasks_max_and_partitions():
    plans = {1: FlowPlan("v1", PARTITIONS), 2: FlowPlan("v7", PARTITIONS[:1])}
    flows = [RunnableFlow(1, "v1", tasks_max=3), RunnableFlow(2, "v7", tasks_max=4)]
    assert desired_tasks(flows=flows, plans=plans) == [
        TaskRef(1, 0),
        TaskRef(1, 1),
        TaskRef(1, 2),
        TaskRef(2, 0),
    ]


def test_no_task_before_the_current_configuration_is_synced():
    flows = [RunnableFlow(1, "v2", tasks_max=2), RunnableFlow(2, "v1", tasks_max=2)]
    plans = {1: FlowPlan("v1", PARTITIONS), 2: None}
    assert desired_tasks(flows=flows, plans=plans) == []


def _decide(**changes):
    args = dict(
        exists=True,
        runnable=True,
        config_version="v1",
        tasks_max=2,
        plan=FlowPlan("v1", PARTITIONS),
        task_index=1,
    )
    return decide_slice(**(args | changes))


def test_slice_runs_its_round_robin_share():
    decision = _decide()
    assert decision.action is SliceAction.RUN
    assert decision.partitions == (("orders", 1), ("payments", 0))


@pytest.mark.parametrize(
    ("changes", "action"),
    [
        ({"exists": False}, SliceAction.STOP),
        ({"runnable": False}, SliceAction.STOP),
        ({"tasks_max": 1}, SliceAction.STOP),  # task 1 retired
        ({"plan": None}, SliceAction.WAIT),
        ({"config_version": "v2"}, SliceAction.WAIT),  # config edited: wait for its topic sync
    ],
)
def test_slice_stops_or_waits(changes, action):
    assert _decide(**changes).action is action


def test_cached_task_only_continues_its_own_chain_without_a_gap():
    ran = ChainPosition("v1", "chain-a", 4)
    assert cached_task_is_current(cached=ran, config_version="v1", chain="chain-a", seq=5)
    assert not cached_task_is_current(
        cached=ran, config_version="v1", chain="chain-a", seq=7
    )  # ran elsewhere
    assert not cached_task_is_current(cached=ran, config_version="v1", chain="chain-b", seq=5)  # taken over
    assert not cached_task_is_current(
        cached=ran, config_version="v2", chain="chain-a", seq=5
    )  # config edited
    assert not cached_task_is_current(cached=None, config_version="v1", chain="chain-a", seq=0)


def test_backoff_grows_and_is_capped():
    delays = [backoff_s(consecutive_failures=n, base_s=0.5, cap_s=5.0) for n in range(7)]
    assert delays == [0.0, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_chain_is_offered_back_every_rebalance_period_only_when_that_evens_its_pool():
    reads = []

    def load(held, *others):
        def read():
            reads.append(held)
            return PoolLoad(held=held, others=others)

        return read

    # A new, idle worker in the pool: the chain is offered at every rebalance point (and only there).
    assert [stays_on_worker(seq=seq, rebalance_slices=3, load=load(2, 0)) for seq in range(6)] == [
        True,
        True,
        False,
        True,
        True,
        False,
    ]
    assert len(reads) == 2, "the pool's load is read at the rebalance points only"
    # Balanced (2 against 1 and 1, 1 against 1, alone): the chain stays, its task is not restarted.
    assert stays_on_worker(seq=2, rebalance_slices=3, load=load(2, 1, 1))
    assert stays_on_worker(seq=2, rebalance_slices=3, load=load(1, 1))
    assert stays_on_worker(seq=2, rebalance_slices=3, load=load(3))
    # Uneven against one worker of several: offered.
    assert not stays_on_worker(seq=2, rebalance_slices=3, load=load(3, 2, 1))
    # Redis cannot tell: offered, as before the pool's load was read.
    assert not stays_on_worker(seq=2, rebalance_slices=3, load=lambda: None)
    assert all(stays_on_worker(seq=seq, rebalance_slices=0, load=load(9, 0)) for seq in range(5))
