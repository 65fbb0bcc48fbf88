"""One-time warnings: a standing condition is warned about once per process; librdkafka's warning about
a property we set on purpose (enable.gapless.guarantee) is one INFO line, other warnings pass; a fenced
producer's lines are WARNINGs, not librdkafka's CRITICAL."""

from __future__ import annotations

import logging
import uuid

import pytest
from confluent_kafka import KafkaException

from replication.kafka.clients import make_producer
from replication.logonce import warn_once
from tests.replication.test_source_task import create_topics


def test_warn_once_warns_the_first_time_and_debugs_the_repeats(caplog):
    log = logging.getLogger("tests.log_once")
    text = f"cluster {uuid.uuid4().hex}: no authorizer"
    with caplog.at_level(logging.DEBUG, logger="tests.log_once"):
        for _ in range(3):
            warn_once(log, "flow f: %s", text)
        warn_once(log, "flow g: %s", text)  # another condition: warned too
    levels = [(record.levelname, record.getMessage()) for record in caplog.records]
    assert levels == [
        ("WARNING", f"flow f: {text}"),
        ("DEBUG", f"flow f: {text}"),
        ("DEBUG", f"flow f: {text}"),
        ("WARNING", f"flow g: {text}"),
    ]


def test_gapless_producers_log_one_info_line_not_a_warning_each(cluster_a, caplog):
    with caplog.at_level(logging.DEBUG, logger="replication.kafka.librdkafka"):
        for _ in range(3):
            producer = make_producer(
                cluster_a, overrides={"enable.idempotence": True, "enable.gapless.guarantee": True}
            )
            producer.flush(5)
            producer.poll(0.2)  # the log callback runs on poll
    records = [r for r in caplog.records if r.name == "replication.kafka.librdkafka"]
    assert not [r for r in records if "is experimental" in r.getMessage()]
    assert all(r.levelno < logging.WARNING for r in records if "gapless" in r.getMessage())
    assert len([r for r in records if "enable.gapless.guarantee on purpose" in r.getMessage()]) <= 1


def test_other_librdkafka_warnings_still_pass(cluster_a, caplog):
    with caplog.at_level(logging.DEBUG, logger="replication.kafka.librdkafka"):
        producer = make_producer(cluster_a, overrides={"group.id": "not-for-a-producer"})
        producer.flush(5)
        producer.poll(0.2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("group.id is a consumer property" in message for message in warnings), warnings


def test_a_fenced_producers_lines_are_warnings_not_critical(cluster_a, unique_name, caplog):
    """A second producer of the same transactional id fences the first on Apache Kafka; the first one's
    next send fails as librdkafka's FATAL/TXNERR (CRITICAL) lines say, here WARNINGs."""
    create_topics(cluster_a, [unique_name], 1)
    overrides = {"transactional.id": f"fenced-{unique_name}"}
    with caplog.at_level(logging.DEBUG, logger="replication.kafka.librdkafka"):
        zombie = make_producer(cluster_a, overrides=overrides)
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.produce(unique_name, value=b"before", partition=0)
        zombie.flush(30)
        successor = make_producer(cluster_a, overrides=overrides)
        successor.init_transactions(30)  # fences the zombie
        zombie.produce(unique_name, value=b"after", partition=0)
        with pytest.raises(KafkaException):
            zombie.commit_transaction(30)
        zombie.poll(0.5)  # the log callback runs on poll
    records = [r for r in caplog.records if r.name == "replication.kafka.librdkafka"]
    fenced = [r for r in records if "fenced by a newer instance" in r.getMessage()]
    assert fenced, [r.getMessage() for r in records]
    assert all(r.levelno <= logging.WARNING for r in fenced)
    assert not [r for r in records if r.levelno > logging.WARNING and "epoch" in r.getMessage()]
