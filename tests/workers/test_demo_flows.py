"""The demo's flows on each broker: the embedded broker holds every fetch for fetch.wait.max.ms even when
records are there, so the demo on it fetches every 10 ms; on Apache Kafka the engine's default holds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from controlplane.flows import engine
from replication.demo import DEMO_PROPERTIES
from replication.kafka.source_io import CONSUMER_DEFAULTS, source_consumer_overrides
from replication.mm2file import parse_mm2
from workers.demo import store_demo_flows


def fetch_wait(flow) -> object:
    config = engine.flow_to_config(flow)
    return source_consumer_overrides(config, engine.cluster_to_config(flow.source))["fetch.wait.max.ms"]


@pytest.mark.django_db
def test_the_demo_on_the_embedded_broker_fetches_every_10_ms_and_on_apache_kafka_takes_the_default(
    monkeypatch,
):
    servers = {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"}
    monkeypatch.setenv("DEMO_KAFKA", "embedded")
    flows = store_demo_flows(servers=servers)
    assert [fetch_wait(flow) for flow in flows] == ["10", "10"]
    assert all(not flow.exactly_once_transactions for flow in flows)

    # The same database moved to Apache Kafka (`make demo KAFKA=apache`): no 10 ms override left behind.
    monkeypatch.setenv("DEMO_KAFKA", "apache")
    flows = store_demo_flows(servers=servers)
    assert [fetch_wait(flow) for flow in flows] == [500, 500] == [CONSUMER_DEFAULTS["fetch.wait.max.ms"]] * 2
    assert all(flow.exactly_once_transactions for flow in flows)


def test_the_engine_mode_demo_on_the_embedded_broker_fetches_every_10_ms():
    parsed = parse_mm2(DEMO_PROPERTIES.format(dc1="127.0.0.1:1", dc2="127.0.0.1:2"))
    config = parsed.config
    assert parsed.warnings == ()
    assert [
        source_consumer_overrides(flow, config.cluster(flow.source))["fetch.wait.max.ms"]
        for flow in config.flows
    ] == ["10", "10"]


def test_make_demo_runs_apache_kafka_with_java_and_says_why_it_does_not_without(tmp_path):
    """Issue 36 item 6: `make demo` runs the product users run (Apache Kafka, transactions on) wherever
    Java and Maven are there; without them the embedded broker, with a line saying why."""
    repo = Path(__file__).resolve().parents[2]
    dry = subprocess.run(["make", "-n", "demo"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert "DEMO_KAFKA=apache" in dry.stdout, dry.stdout[-2000:] + dry.stderr
    bare = subprocess.run(  # a PATH with neither java nor mvn
        [shutil.which("make"), "-n", "demo"],
        cwd=repo,
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "DEMO_KAFKA=embedded" in bare.stdout, bare.stdout[-2000:] + bare.stderr
    assert 'if [ "embedded" = embedded ] && [ -z "" ]; then' in bare.stdout  # the line is printed
    chosen = subprocess.run(
        ["make", "-n", "demo", "KAFKA=embedded"], cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert "DEMO_KAFKA=embedded" in chosen.stdout and '[ -z "yescommand line" ]' in chosen.stdout
