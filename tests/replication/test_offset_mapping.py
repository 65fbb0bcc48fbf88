"""Offset mapping (pure): both directions, exact within the syncs, the sync each answer rests on, and a
named error for every item that cannot be translated."""

from __future__ import annotations

from replication.formats import OffsetSync
from replication.offset_mapping import Direction, MappedTopic, MappingError, OffsetQuery, map_offsets
from replication.offset_sync_store import OffsetSyncStore

TOPICS = [MappedTopic("orders", "A.orders", 2)]


def store_with_a_gap() -> OffsetSyncStore:
    """orders[0]: upstream 10.. at downstream 0.. (the first 10 were gone before mirroring), a gap of 5
    upstream offsets (a compaction, markers) at upstream 20, and progress confirmed up to upstream 40."""
    store = OffsetSyncStore()
    store.update_all(
        [OffsetSync("orders", 0, 10, 0), OffsetSync("orders", 0, 25, 10), OffsetSync("orders", 0, 40, 25)]
    )
    return store


def forward(*queries: tuple[str, int, int]) -> list[dict]:
    answers = map_offsets(
        [OffsetQuery(*q) for q in queries],
        direction=Direction.SOURCE_TO_TARGET,
        topics=TOPICS,
        store=store_with_a_gap(),
    )
    return [answer.to_dict() for answer in answers]


def back(*queries: tuple[str, int, int]) -> list[dict]:
    answers = map_offsets(
        [OffsetQuery(*q) for q in queries],
        direction=Direction.TARGET_TO_SOURCE,
        topics=TOPICS,
        store=store_with_a_gap(),
    )
    return [answer.to_dict() for answer in answers]


def test_source_to_target_is_exact_and_names_the_sync_it_used():
    first, in_gap, after_gap, newest, past = forward(
        ("orders", 0, 15), ("orders", 0, 22), ("orders", 0, 30), ("orders", 0, 41), ("orders", 0, 60)
    )
    assert first["translated"] == {"topic": "A.orders", "partition": 0, "offset": 5}
    assert first["exact"] and first["offset_sync"]["upstream_offset"] == 10
    assert in_gap["translated"]["offset"] == 10  # no record there upstream: the next one's copy
    assert after_gap["translated"]["offset"] == 15
    assert (after_gap["offset_sync"]["upstream_offset"], after_gap["offset_sync"]["downstream_offset"]) == (
        25,
        10,
    )
    assert newest["translated"]["offset"] == 26 and newest["exact"]
    assert newest["offset_sync"]["upstream_offset"] == 40  # the newest sync bounds it
    assert past["translated"]["offset"] == 26 and not past["exact"]  # re-reads, never skips
    assert "re-reads" in past["message"]


def test_target_to_source_inverts_source_to_target():
    for upstream in (10, 15, 19, 25, 33, 40, 41):
        (there,) = forward(("orders", 0, upstream))
        (home,) = back(("A.orders", 0, there["translated"]["offset"]))
        assert home["translated"] == {"topic": "orders", "partition": 0, "offset": upstream}, upstream
        assert home["exact"]


def test_every_item_that_cannot_be_translated_has_its_own_error_and_the_others_still_answer():
    answers = forward(
        ("payments", 0, 1), ("orders", 2, 1), ("orders", 1, 1), ("orders", 0, 3), ("orders", 0, 12)
    )
    assert [a.get("error") for a in answers] == [
        MappingError.UNKNOWN_TOPIC,
        MappingError.UNKNOWN_PARTITION,
        MappingError.NO_OFFSET_SYNC,
        MappingError.BEFORE_FIRST_SYNC,
        None,
    ]
    assert "payments is not a topic this flow replicates" in answers[0]["message"]
    assert "partitions 0..1" in answers[1]["message"]
    assert "offsets from 10 on translate exactly" in answers[3]["message"]
    assert answers[4]["translated"]["offset"] == 2
    (by_source_name,) = back(("orders", 0, 1))  # from the target, the remote name is the one known there
    assert by_source_name["error"] == MappingError.UNKNOWN_TOPIC
    (too_old,) = back(("A.orders", 1, 0))
    assert too_old["error"] == MappingError.NO_OFFSET_SYNC
