"""Fencing a flow's transactional producers on its target (`replication.generations`), as Kafka Connect's
`fenceZombieSourceTasks` does with `Admin.fenceProducers` before a new generation of tasks writes.

confluent-kafka has no fenceProducers call, so `fence_transactional_ids` does what it does: a producer of
each transactional id initialises its transactions, which bumps the id's epoch on its coordinator (every
earlier producer of the id is fenced, the transaction it left open is aborted), and closes.

Which ids: `transactional_task_ids` asks the target's transaction coordinators which of the flow's ids
(`mirrorplane-<flow>-<task index>`) they know (ListTransactions, Kafka 3.0+, through kafka-python's
network layer: confluent-kafka does not expose it; it needs DESCRIBE on those TransactionalIds, which
the tasks' principal has). The coordinators keep an id until `transactional.id.expiration.ms` (7 days)
after its last transaction, so this finds ids used before a Redis loss, or by an earlier dedicated-mode
process, whatever the runtime remembers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from kafka import KafkaAdminClient

from replication.config import ClusterConfig, FlowConfig
from replication.kafka.log_dirs import kafka_python_config
from replication.kafka.source_io import mirror_producer, transactional_id_prefix

FENCE_TIMEOUT_S = 30.0  # init_transactions of a fencing producer (it waits for the abort it causes)
FENCE_PARALLELISM = 8  # fencing producers at once
LIST_TIMEOUT_S = 10.0


class TransactionsUnlisted(RuntimeError):
    """Why the target's transactional ids could not be listed (an old broker, no DESCRIBE, no answer)."""


def fence_transactional_ids(flow: FlowConfig, target: ClusterConfig, *, task_ids: int) -> None:
    """Fence every producer of the flow's tasks 0..task_ids-1 on `target`, the ids in parallel; raises
    the first failure (nothing is recorded as fenced then: the caller tries again)."""
    with ThreadPoolExecutor(max_workers=max(min(task_ids, FENCE_PARALLELISM), 1)) as pool:
        list(pool.map(lambda task_index: _fence(flow, target, task_index), range(task_ids)))


def _fence(flow: FlowConfig, target: ClusterConfig, task_index: int) -> None:
    producer = mirror_producer(flow, target, task_index=task_index)
    try:
        producer.init_transactions(FENCE_TIMEOUT_S)
    finally:
        producer.close()


def transactional_task_ids(flow: FlowConfig, target: ClusterConfig) -> int:
    """How many task ids the flow's transactional ids on `target` reach: 1 + the highest task index of
    an id the coordinators know (0: none). Raises `TransactionsUnlisted`."""
    prefix = transactional_id_prefix(flow)
    indexes = [
        int(rest)
        for listed in _listed_transactional_ids(target)
        if listed.startswith(prefix) and (rest := listed[len(prefix) :]).isdigit()
    ]
    return max(indexes, default=-1) + 1


def _listed_transactional_ids(target: ClusterConfig) -> list[str]:
    admin = None
    try:
        timeout_ms = int(LIST_TIMEOUT_S * 1000)
        config = kafka_python_config(target) | {"client_id": "mirrorplane-fencing"}
        admin = KafkaAdminClient(**config, request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms)
        by_broker = admin.list_transactions()
    except Exception as exc:  # kafka-python's errors have no common base worth naming: say what it was
        raise TransactionsUnlisted(
            f"cluster {target.alias}: listing its transactional ids failed: {exc or type(exc).__name__}"
        ) from exc
    finally:
        if admin is not None:
            admin.close()
    return [listing.transactional_id for listings in by_broker.values() for listing in listings]
