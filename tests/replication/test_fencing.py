"""Fencing a flow's transactional producers on Apache Kafka (replication.kafka.fencing): the target's
coordinators tell which task ids the flow used, and fencing them aborts what a zombie left open."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException

from replication.config import DeliveryGuarantee, FlowConfig
from replication.kafka.fencing import fence_transactional_ids, transactional_task_ids
from replication.kafka.source_io import PartitionReader, mirror_producer
from tests.replication.test_source_task import create_topics

pytestmark = pytest.mark.kafka


def test_the_ids_a_flow_used_are_listed_and_fencing_them_aborts_the_zombies_transaction(
    cluster_b, unique_name
):
    # A flow of its own (the session's other tests use A->B's ids on the same cluster).
    flow = FlowConfig(
        source=f"S{unique_name[-8:]}",
        target="B",
        enabled=True,
        delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE,
    )
    assert transactional_task_ids(flow, cluster_b) == 0
    create_topics(cluster_b, [unique_name], 1)
    zombie = mirror_producer(flow, cluster_b, task_index=4)  # a task index of an earlier assignment
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(unique_name, value=b"uncommitted", partition=0)
    assert zombie.flush(30) == 0
    assert transactional_task_ids(flow, cluster_b) == 5

    fence_transactional_ids(flow, cluster_b, task_ids=5)

    with pytest.raises(KafkaException, match="fenced"):
        zombie.commit_transaction(30)
    reader = PartitionReader(cluster_b, read_committed=True)
    try:
        records, failures = reader.read_all_to_end({(unique_name, 0): 0})
    finally:
        reader.close()
    assert not failures and records[(unique_name, 0)] == []  # aborted, not merely pending
