"""The fetch policy of the task's loop: batch when records are plentiful, never wait for a batch to fill."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replication.fetching import CONSUME_BATCH, IDLE_WAIT_S, IN_FLIGHT_WAIT_S, FetchPlan, fetch_plan


def test_an_idle_task_waits_for_its_first_record_then_takes_up_to_a_whole_batch():
    assert fetch_plan(remaining_s=1.0, records_left=100_000, room=10_000, in_flight=0) == FetchPlan(
        first_wait_s=IDLE_WAIT_S, batch=CONSUME_BATCH
    )


def test_with_records_in_flight_the_wait_is_short_so_their_acknowledgements_are_served():
    plan = fetch_plan(remaining_s=1.0, records_left=100_000, room=9_000, in_flight=1_000)
    assert plan == FetchPlan(first_wait_s=IN_FLIGHT_WAIT_S, batch=9_000)


def test_the_wait_never_outlasts_the_slice():
    assert fetch_plan(remaining_s=0.002, records_left=10, room=10, in_flight=0).first_wait_s == 0.002
    assert fetch_plan(remaining_s=-0.5, records_left=10, room=10, in_flight=0).first_wait_s == 0.0


def test_the_batch_is_bounded_by_the_records_the_slice_may_still_take_and_the_room_in_flight():
    assert fetch_plan(remaining_s=1.0, records_left=7, room=10_000, in_flight=0).batch == 7
    assert fetch_plan(remaining_s=1.0, records_left=100_000, room=3, in_flight=9_997).batch == 3


@given(
    remaining_s=st.floats(min_value=-10, max_value=10, allow_nan=False),
    records_left=st.integers(min_value=0, max_value=10**6),
    room=st.integers(min_value=0, max_value=10**6),
    in_flight=st.integers(min_value=0, max_value=10**6),
)
def test_a_fetch_never_waits_longer_than_the_idle_wait_nor_takes_more_than_allowed(
    remaining_s, records_left, room, in_flight
):
    plan = fetch_plan(remaining_s=remaining_s, records_left=records_left, room=room, in_flight=in_flight)
    assert 0.0 <= plan.first_wait_s <= min(IDLE_WAIT_S, max(remaining_s, 0.0))
    assert 0 <= plan.batch <= min(CONSUME_BATCH, records_left, room)
