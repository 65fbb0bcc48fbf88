"""Drill verdicts (pure): a partition passes only when both next records are the same record, or when
neither side has one; every failure names its reason."""

from __future__ import annotations

from replication.drill import estimate_rto, judge_partition, shadow_group_name
from replication.verification import MirroredRecord

SOURCE = MirroredRecord(offset=7, key=b"k", value=b"v", headers=(("h", b"1"),), timestamp_ms=1000)


def copy(offset: int, **changes) -> MirroredRecord:
    fields = {"key": SOURCE.key, "value": SOURCE.value, "headers": SOURCE.headers, "timestamp_ms": 1000}
    return MirroredRecord(offset=offset, **(fields | changes))


def judge(source, target, translated: int | None = 5, note: str = ""):
    return judge_partition(translated=translated, note=note, source=source, target=target, wait_s=3)


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


def test_shadow_group_names_are_bounded_and_new_for_each_attempt():
    assert shadow_group_name(operation_id=4, attempt=2, group="billing") == "mirrorplane-drill-4.2-billing"
    long_a, long_b = (shadow_group_name(operation_id=4, attempt=1, group="g" * 300 + s) for s in "ab")
    assert len(long_a) == len(long_b) == 249 and long_a != long_b


def test_rto_is_the_sum_of_the_measured_steps():
    assert estimate_rto(plan_s=1.2, drain_s=3.0, move_groups_s=0.3)["total_s"] == 4.5
