"""Drill verdicts (pure): a partition passes only when both next records are the same record, or when
neither side has one; every failure names its reason."""

from __future__ import annotations

from replication.checkpoint import CommittedOffset
from replication.drill import (
    estimate_rto,
    judge_partition,
    offsets_past_syncs,
    past_syncs_from,
    shadow_group_name,
)
from replication.formats import OffsetSync
from replication.offset_sync_store import OffsetSyncStore
from replication.verification import MirroredRecord

SOURCE = MirroredRecord(offset=7, key=b"k", value=b"v", headers=(("h", b"1"),), timestamp_ms=1000)


def copy(offset: int, **changes) -> MirroredRecord:
    fields = {"key": SOURCE.key, "value": SOURCE.value, "headers": SOURCE.headers, "timestamp_ms": 1000}
    return MirroredRecord(offset=offset, **(fields | changes))


def judge(source, target, translated: int | None = 5, note: str = "", past_syncs_from: int | None = None):
    return judge_partition(
        translated=translated,
        note=note,
        source=source,
        target=target,
        wait_s=3,
        past_syncs_from=past_syncs_from,
    )


def test_same_record_passes_whatever_the_offsets_and_our_headers():
    ours = copy(5, headers=(("h", b"1"), ("mirrorplane.provenance", b"A")))
    assert judge(SOURCE, ours).passed
    assert judge(None, None).passed and "caught up" in judge(None, None).reason


def test_every_failure_says_why():
    assert "content differs" in judge(SOURCE, copy(5, value=b"other")).reason
    assert "content differs" in judge(SOURCE, copy(5, timestamp_ms=2000)).reason
    assert "did not reach the target within 3 s" in judge(SOURCE, None).reason
    assert "never had" in judge(None, copy(5)).reason
    untranslatable = judge(SOURCE, None, translated=None, note="older than the oldest offset sync")
    assert not untranslatable.passed
    assert untranslatable.reason.endswith("older than the oldest offset sync")


def test_a_group_past_the_newest_offset_sync_waits_for_it_and_fails_with_that_reason_without_it():
    """Three transactions of 2 records mirrored to a target without markers: syncs at each gap; the sync of
    the newest record (7 -> 5) comes with the mirror's next progress sync."""
    store = OffsetSyncStore()
    store.update_all(OffsetSync("orders", 0, up, down) for up, down in ((0, 0), (3, 2), (6, 4)))
    assert past_syncs_from(store, "orders", 0, 7) is None  # one past the newest sync: exact
    assert past_syncs_from(store, "orders", 0, 8) == 7  # caught up past the last marker
    assert (
        past_syncs_from(store, "orders", 1, 8) is None and past_syncs_from(store, "orders", 0, None) is None
    )
    committed = {
        "audit": {("orders", 0): CommittedOffset(8), ("orders", 1): CommittedOffset(8)},
        "billing": {("orders", 0): CommittedOffset(4), ("other", 0): CommittedOffset(9)},
    }
    # orders[1] has no sync at all (deleted, or never written): nothing will place it, not waited for.
    assert offsets_past_syncs(store, committed, {"orders": "A.orders"}) == [("orders", 0)]
    # Without the progress sync the shadow re-reads the copy of source offset 7 at target offset 5.
    reread = judge(None, copy(5), translated=5, past_syncs_from=7)
    assert not reread.passed and "never had" not in reread.reason
    assert "only up to source offset 7" in reread.reason and "re-reads from target offset 5" in reread.reason
    assert "re-reads" in judge(SOURCE, copy(5, value=b"other"), past_syncs_from=7).reason
    assert judge(SOURCE, copy(5), past_syncs_from=7).passed  # the same record all the same
    assert "did not reach the target" in judge(SOURCE, None, past_syncs_from=7).reason  # the flow lags
    store.update(OffsetSync("orders", 0, 7, 5))
    assert offsets_past_syncs(store, committed, {"orders": "A.orders"}) == []
    assert store.translate_downstream("orders", 0, 8) == 6  # exact: nothing on the target after 7's copy


def test_shadow_group_names_are_bounded_and_new_for_each_attempt():
    assert shadow_group_name(operation_id=4, attempt=2, group="billing") == "mirrorplane-drill-4.2-billing"
    long_a, long_b = (shadow_group_name(operation_id=4, attempt=1, group="g" * 300 + s) for s in "ab")
    assert len(long_a) == len(long_b) == 249 and long_a != long_b


def test_rto_is_the_sum_of_the_measured_steps():
    assert estimate_rto(plan_s=1.2, drain_s=3.0, move_groups_s=0.3)["total_s"] == 4.5
