"""The offset mapping API on a replicated flow (embedded brokers, replication in a thread): the record at
the translated offset on the target is the copy of the record at the given offset on the source (by
content) both ways, in one batch with per-item errors, for a viewer; batches are bounded."""

from __future__ import annotations

import pytest

from tests.failover.conftest import (
    create_topic,
    produce_transactions,
    read_partition,
    store_cluster,
    stored_flow,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

PARTITIONS = 2


def test_offsets_translate_both_ways_in_bulk_by_content_with_errors_per_item(
    cluster_a, cluster_b, admin_user, client_as, mirrors, unique_name, settings
):
    topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
    source = store_cluster(actor=admin_user, config=cluster_a)
    target = store_cluster(actor=admin_user, config=cluster_b)
    flow = stored_flow(actor=admin_user, source=source, target=target, topic=topic, group=group)
    create_topic(cluster_a, topic, PARTITIONS)
    # Only partition 0 gets records; transaction markers leave gaps, so source and target offsets differ.
    produce_transactions(cluster_a, topic, partitions=1, batches=4, tag="t")
    on_source = dict(read_partition(cluster_a, topic, 0))
    mirrors(flow.pk, topic, PARTITIONS)
    remote_topic = f"A.{topic}"
    wait_for(
        lambda: [v for _, v in read_partition(cluster_b, remote_topic, 0)] == list(on_source.values()),
        what="replication",
    )
    on_target = dict(read_partition(cluster_b, remote_topic, 0))

    viewer = client_as("viewer")
    url = f"/api/v1/flows/{flow.pk}/offsets/translate/"
    offsets = sorted(on_source)
    response = viewer.post(
        url,
        {
            "offsets": [{"topic": topic, "partition": 0, "offset": o} for o in offsets]
            + [
                {"topic": "no-such-topic", "partition": 0, "offset": 0},
                {"topic": topic, "partition": 7, "offset": 0},
                {"topic": topic, "partition": 1, "offset": 0},
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["flow"], body["direction"], body["translated"], body["failed"]) == (
        "A->B",
        "source_to_target",
        len(offsets),
        3,
    )
    answers = body["offsets"]
    for answer in answers[: len(offsets)]:
        assert answer["exact"] and answer["translated"]["topic"] == remote_topic, answer
        assert on_target[answer["translated"]["offset"]] == on_source[answer["offset"]]
        assert answer["offset_sync"]["topic"] == topic
        assert answer["offset_sync"]["upstream_offset"] <= answer["offset"]
    assert [a["error"] for a in answers[len(offsets) :]] == [
        "unknown_topic",
        "unknown_partition",
        "no_offset_sync",
    ]

    back = viewer.post(
        url,
        {
            "direction": "target_to_source",
            "offsets": [{"topic": remote_topic, "partition": 0, "offset": o} for o in sorted(on_target)],
        },
        format="json",
    )
    assert back.status_code == 200, back.content
    for answer in back.json()["offsets"]:
        assert answer["translated"]["topic"] == topic
        assert on_source[answer["translated"]["offset"]] == on_target[answer["offset"]]

    settings.OFFSET_MAPPING_MAX_ITEMS = 2
    too_many = viewer.post(
        url, {"offsets": [{"topic": topic, "partition": 0, "offset": 0}] * 3}, format="json"
    )
    assert too_many.status_code == 400 and "at most 2 per request" in too_many.json()["offsets"][0]
    negative = viewer.post(url, {"offsets": [{"topic": topic, "partition": 0, "offset": -1}]}, format="json")
    assert negative.status_code == 400 and "offset" in negative.json()["offsets"]["0"]  # item 0, field offset
    wrong_way = viewer.post(url, {"direction": "sideways", "offsets": []}, format="json")
    assert wrong_way.status_code == 400 and "direction" in wrong_way.json()
    assert client_as("anonymous").post(url, {"offsets": []}, format="json").status_code == 401
    assert client_as("norole").post(url, {"offsets": []}, format="json").status_code == 403
