"""`bench scale --load-client java`: LoadProducer.java writes what it reports, round robin over every
partition, against an Apache Kafka broker; and the window's records are counted exactly."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition

from bench.java_load import counted_in_window, produce_with_java, sent_figures
from harness.runtime import create_topic, latest_offsets
from replication.kafka.clients import make_admin


def test_the_window_counts_the_records_sent_within_it_from_the_millisecond_lines():
    lines = ["1000 3\n", "1001 2\n", "1500 7\n", "2000 1\n", "2001 4\n", "\n"]
    assert counted_in_window(lines, start_ms=1001, end_ms=2000) == 10
    assert counted_in_window(lines, start_ms=0, end_ms=10_000) == 17
    assert sent_figures("sent 12 seconds 3.5 failures 1") == (12, 3.5, 1)


@pytest.mark.kafka
def test_the_java_load_writes_every_partition_round_robin_and_reports_what_it_sent(cluster_a, unique_name):
    create_topic(cluster_a, unique_name, partitions=6)
    window, stop, ready, out = [0.0, 0.0], threading.Event(), threading.Event(), [0, 0, 0, 0]
    load = threading.Thread(
        target=produce_with_java,
        args=(cluster_a.bootstrap_servers, {unique_name: 6}, 20.0, window, stop, ready, out),
    )
    load.start()
    assert ready.wait(120), "LoadProducer did not start"
    time.sleep(1)
    window[0] = time.time() * 1000
    time.sleep(2)
    window[1] = time.time() * 1000
    stop.set()
    load.join(120)
    sent, seconds, in_window, failures = out
    assert failures == 0 and seconds > 2
    assert 0 < in_window < sent  # the window is two seconds of a longer run
    admin = make_admin(cluster_a)
    ends = latest_offsets(admin, [TopicPartition(unique_name, p) for p in range(6)])
    assert sum(ends.values()) == sent  # everything it counted was written, and nothing else
    assert max(ends.values()) - min(ends.values()) <= 1  # round robin over every partition
