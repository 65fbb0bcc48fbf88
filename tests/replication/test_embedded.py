"""The embedded broker launcher: ready means it answers metadata; stop leaves no process behind."""

import subprocess
import sys
import textwrap

from confluent_kafka.admin import AdminClient

from replication.kafka.embedded import EmbeddedBroker, embedded_clusters


def test_started_broker_answers_metadata_and_stop_leaves_no_process():
    with embedded_clusters(["X"]) as brokers:
        broker = brokers["X"]
        process = broker.process
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=5)
        assert metadata.brokers
    assert process.poll() is not None


def test_broker_dies_with_its_parent_process():
    script = textwrap.dedent(
        """
        import os, sys
        from replication.kafka.embedded import EmbeddedBroker
        broker = EmbeddedBroker(name="orphan").start()
        print(broker.process.pid, flush=True)
        os._exit(0)  # no cleanup: only PR_SET_PDEATHSIG can stop the broker now
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.strip())
    deadline_checks = 50
    for _ in range(deadline_checks):
        try:
            with open(f"/proc/{pid}/status") as status:
                if "State:\tZ" in status.read():
                    break
        except FileNotFoundError:
            break
        subprocess.run(["sleep", "0.1"])
    else:
        raise AssertionError(f"embedded broker {pid} outlived its parent")


def test_cli_prints_bootstrap_servers_and_stops_on_sigterm():
    process = subprocess.Popen(
        [sys.executable, "-m", "replication", "embedded-kafka", "--clusters", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = [process.stdout.readline() for _ in range(2)]
    assert lines[0].startswith("dc1.bootstrap.servers = 127.0.0.1:")
    assert lines[1].startswith("dc2.bootstrap.servers = 127.0.0.1:")
    process.terminate()
    assert process.wait(timeout=30) == 0


def test_stopping_twice_is_harmless():
    broker = EmbeddedBroker(name="idem").start()
    broker.stop()
    broker.stop()
    assert broker.process is None
