"""The shipped deploy/ files in a real monitoring stack: Prometheus (Debian's) scrapes a running
Mirrorplane (gunicorn, PostgreSQL, Redis, a Celery worker) with the shipped prometheus.yml and evaluates
the shipped rules, Alertmanager (Debian's) routes the alerts with the shipped alertmanager.yml to a local
webhook receiver (tests/receiver.py).

Only what cannot run here is changed in copies of the files: addresses (the compose service names), the
token file path, and the timings (1 s scrapes and evaluations, `for:` 2 s, 1 s Alertmanager grouping), so
the test takes seconds; the `for:` durations themselves are covered by the promtool unit tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from controlplane.flows import services
from controlplane.status.models import FlowPartitionStatus
from harness.runtime import Gunicorn, free_port, start_prometheus, wait_until
from tests.receiver import Receiver
from tests.status_reports import stored_report, task_rollup_rebuild

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TOKEN = "stack-scrape-token-0123456789"


def _binary(name: str, target: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: run `make {target}` (Debian's package; `make test` installs it)"
    return path


def _prometheus_config(tmp_path: Path, *, web: str, alertmanager: str, port: int) -> Path:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    (tmp_path / "token").write_text(TOKEN)
    for job in config["scrape_configs"]:
        job.pop("scrape_interval", None)
        job["scrape_timeout"] = "1s"
        if job["job_name"] == "mirrorplane":
            job["authorization"]["credentials_file"] = str(tmp_path / "token")
            job["static_configs"] = [{"targets": [web]}]
        else:
            job["static_configs"] = [{"targets": [f"127.0.0.1:{port}"]}]
    config["alerting"]["alertmanagers"][0]["static_configs"] = [{"targets": [alertmanager]}]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "mirrorplane-rules.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "2s"
    (tmp_path / "mirrorplane-rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _alertmanager_config(tmp_path: Path, *, receiver_url: str) -> Path:
    config = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    config["route"].update(group_wait="1s", group_interval="1s")
    for receiver in config["receivers"]:
        for webhook in receiver["webhook_configs"]:
            path = "/" + webhook["url"].split("://", 1)[1].split("/", 1)[1]
            webhook["url"] = receiver_url + path
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _notifications(receiver: Receiver, alertname: str, status: str) -> list[tuple[str, dict]]:
    return [
        (received.path, alert)
        for received in receiver.received
        for alert in received.body.get("alerts", [])
        if alert["labels"]["alertname"] == alertname and alert["status"] == status
    ]


@pytest.mark.slow
def test_the_shipped_rules_page_through_prometheus_and_alertmanager(celery_runtime, tmp_path):
    _binary("prometheus", "prometheus")
    alertmanager = _binary("prometheus-alertmanager", "alertmanager")
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers="127.0.0.1:9")
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers="127.0.0.1:9")
    c = services.cluster_create(actor=None, alias="C", bootstrap_servers="127.0.0.1:9")
    active = services.flow_create(actor=None, source=a, target=b, enabled=True, topics=["orders"])
    paused = services.flow_create(actor=None, source=c, target=b, enabled=True, topics=["orders"])
    services.flow_pause(actor=None, flow=paused)
    # Both 15 minutes behind (the default RPO budget is 60 s); the paused one is behind on purpose.
    for flow in (active, paused):
        for partition, seconds_behind in ((0, 900.0), (1, 5.0)):
            stored_report(
                flow=flow, topic="orders", partition=partition, remote_topic=f"{flow.source.alias}.orders",
                records_behind=1000, seconds_behind=seconds_behind, state="OK", observed_at=timezone.now(),
            )  # fmt: skip
    # The reports stay fresh (not STALE) for the whole test: no worker replicates these flows.
    env = {**celery_runtime.env, "METRICS_BEARER_TOKEN": TOKEN, "MIRRORPLANE_STALE_AFTER_S": "3600"}
    web = Gunicorn(env=env, log=tmp_path / "web.log").start()
    processes = []
    with Receiver() as receiver:
        try:
            am_port, prom_port = free_port(), free_port()
            processes.append(
                subprocess.Popen(
                    [
                        alertmanager,
                        f"--config.file={_alertmanager_config(tmp_path, receiver_url=receiver.url)}",
                        f"--storage.path={tmp_path / 'alertmanager'}",
                        f"--web.listen-address=127.0.0.1:{am_port}",
                        "--cluster.listen-address=",
                    ],
                    stdout=(tmp_path / "alertmanager.log").open("wb"),
                    stderr=subprocess.STDOUT,
                )
            )
            config = _prometheus_config(
                tmp_path,
                web=web.url.removeprefix("http://"),
                alertmanager=f"127.0.0.1:{am_port}",
                port=prom_port,
            )
            processes.append(start_prometheus(config=config, workdir=tmp_path, port=prom_port))
            # No replication worker runs: one flow should replicate (A->B; C->B is paused).
            firing = wait_until(
                lambda: _notifications(receiver, "MirrorplaneNoReplicationWorker", "firing"),
                timeout_s=90,
                what="the NoReplicationWorker alert at the receiver",
            )
            path, alert = firing[0]
            assert path == "/mirrorplane/oncall"  # critical: the on-call route
            assert alert["labels"]["severity"] == "critical"
            assert alert["annotations"]["summary"] == (
                "No worker consumes the replication queue: 1 flow(s) are not replicating"
            )
            assert (
                alert["annotations"]["runbook_url"] == "docs/alert-runbook.md#mirrorplanenoreplicationworker"
            )
            # A replication worker starts: the alert resolves, and the receiver is told.
            celery_runtime.start_worker("w1", queues="replication")
            wait_until(
                lambda: _notifications(receiver, "MirrorplaneNoReplicationWorker", "resolved"),
                timeout_s=90,
                what="the NoReplicationWorker alert resolved at the receiver",
            )
            # The active flow is over its RPO budget: paged with the figure, the budget and the partition.
            (path, rpo) = wait_until(
                lambda: _notifications(receiver, "MirrorplaneRpoSecondsExceeded", "firing"),
                timeout_s=60,
                what="the RPO alert at the receiver",
            )[0]
            assert path == "/mirrorplane/oncall"
            assert rpo["labels"] | {"flow": "A->B", "source": "A", "target": "B"} == rpo["labels"]
            assert rpo["annotations"]["summary"] == "Flow A->B is 15m 0s behind, over its RPO budget"
            assert (
                "over its RPO budget of 1m 0s (worst partition orders-0)" in rpo["annotations"]["description"]
            )
            # It catches up: resolved.
            FlowPartitionStatus.objects.filter(flow=active).update(
                seconds_behind=1.0, observed_at=timezone.now()
            )
            for partition in (0, 1):
                task_rollup_rebuild(flow_id=active.pk, task_index=partition)
            wait_until(
                lambda: _notifications(receiver, "MirrorplaneRpoSecondsExceeded", "resolved"),
                timeout_s=60,
                what="the RPO alert resolved at the receiver",
            )
            # Beat never ran: the supervisor alert fires too; nothing is sent about the paused flow.
            assert _notifications(receiver, "MirrorplaneSupervisorMissing", "firing")
            flows = {a["labels"].get("flow") for r in receiver.received for a in r.body.get("alerts", [])}
            assert "C->B" not in flows
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)
            web.kill()
