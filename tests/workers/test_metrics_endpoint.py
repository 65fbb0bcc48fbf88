"""/metrics: the live status in Prometheus's format, under gunicorn's several workers, scraped by a real
Prometheus server (Debian's `prometheus`, installed by `make test`)."""

from __future__ import annotations

import shutil

import pytest
import requests
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from controlplane.flows import services
from harness.runtime import Gunicorn, create_topic, free_port, produce, start_prometheus, wait_until
from tests.status_reports import stored_report

TOKEN = "scrape-token-0123456789"
PARTITIONS = 4


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    matches = [v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


@pytest.mark.django_db
def test_metrics_need_a_token_a_user_or_the_open_setting(settings, users):
    settings.METRICS_BEARER_TOKEN = TOKEN
    assert Client().get("/metrics").status_code == 401
    assert "METRICS_BEARER_TOKEN" in Client().get("/metrics").content.decode()
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get("/metrics").status_code == 401
    assert Client(HTTP_AUTHORIZATION=f"Bearer {TOKEN}").get("/metrics").status_code == 200
    viewer = Client()
    viewer.force_login(users["viewer"])
    assert viewer.get("/metrics").status_code == 200
    settings.METRICS_BEARER_TOKEN, settings.METRICS_OPEN = "", True
    assert Client().get("/metrics").status_code == 200


@pytest.mark.django_db
def test_metrics_carry_the_live_status_with_its_age(settings, make_flow, unique_name):
    settings.METRICS_OPEN = True
    flow = make_flow(topics=[unique_name])
    stored_report(
        flow=flow, topic=unique_name, partition=0, remote_topic=f"A.{unique_name}", source_end_offset=120,
        replicated_offset=100, records_behind=20, seconds_behind=3.5, record_age_ms=1500,
        replication_latency_ms=40, record_count=100, byte_count=2000, state="OK", observed_at=timezone.now(),
    )  # fmt: skip
    stored_report(
        flow=flow, topic=unique_name, partition=1, remote_topic=f"A.{unique_name}", records_behind=0,
        seconds_behind=0, record_count=7, byte_count=70, state="OK",
        observed_at=timezone.now() - timezone.timedelta(seconds=settings.MIRRORPLANE_STALE_AFTER_S + 5),
    )  # fmt: skip
    samples = _samples(Client().get("/metrics").content.decode())
    p0 = {"flow": "A->B", "topic": unique_name, "partition": "0"}
    assert _value(samples, "mirrorplane_records_behind", **p0) == 20
    assert _value(samples, "mirrorplane_seconds_behind", **p0) == 3.5
    assert _value(samples, "mirrorplane_record_age_seconds", **p0) == 1.5
    assert _value(samples, "mirrorplane_replication_latency_seconds", **p0) == 0.04
    assert _value(samples, "mirrorplane_records_replicated_total", **p0) == 100
    assert _value(samples, "mirrorplane_bytes_replicated_total", **p0) == 2000
    p1 = {"flow": "A->B", "topic": unique_name, "partition": "1"}
    assert _value(samples, "mirrorplane_partition_state", **p1, state="STALE") == 1
    assert not [
        ls
        for (n, ls) in samples
        if n == "mirrorplane_partition_state" and ("state", "OK") in ls and ("partition", "1") in ls
    ]
    assert _value(samples, "mirrorplane_flow_status_age_seconds", flow="A->B") < 5  # partition 0 is fresh
    assert _value(samples, "mirrorplane_flow_stale", flow="A->B") == 1
    assert _value(samples, "mirrorplane_flow_state", flow="A->B", state="active") == 1
    assert _value(samples, "mirrorplane_flow_records_behind", flow="A->B") == 20
    assert _value(samples, "mirrorplane_data_loss_gaps_total", flow="A->B") == 0
    services.flow_pause(actor=None, flow=flow)
    samples = _samples(Client().get("/metrics").content.decode())
    assert _value(samples, "mirrorplane_flow_state", flow="A->B", state="paused") == 1


@pytest.mark.kafka
@pytest.mark.slow
def test_prometheus_scrapes_records_behind_of_a_replicating_flow_from_gunicorn_workers(
    celery_runtime, make_flow, cluster_a, unique_name, tmp_path
):
    assert shutil.which("prometheus"), (
        "Debian's prometheus is missing: `make test` installs it (make prometheus)"
    )
    create_topic(cluster_a, unique_name, PARTITIONS)
    make_flow(topics=[unique_name])
    celery_runtime.start_worker("w1", queues="replication,metadata,operations")
    celery_runtime.start_beat()
    produce(cluster_a, unique_name, 400, partitions=PARTITIONS)
    env = {**celery_runtime.env, "METRICS_BEARER_TOKEN": TOKEN}
    web = Gunicorn(env=env, log=tmp_path / "gunicorn.log", args=("--workers", "3")).start()
    auth = {"Authorization": f"Bearer {TOKEN}"}

    # Prometheus scrapes from now on (every second), while the worker replicates and the checks below run.
    port = free_port()
    config = tmp_path / "prometheus.yml"
    (tmp_path / "token").write_text(TOKEN)
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: mirrorplane\n"
        "    metrics_path: /metrics\n"
        f"    authorization: {{credentials_file: {tmp_path / 'token'}}}\n"
        f"    static_configs: [{{targets: ['{web.url.removeprefix('http://')}']}}]\n"
    )
    server = start_prometheus(config=config, workdir=tmp_path, port=port)
    try:

        def replicated() -> float:
            samples = _samples(requests.get(f"{web.url}/metrics", headers=auth, timeout=10).text)
            # Only this test's topic: the flow also mirrors A's `heartbeats` if an earlier test's flow wrote there.
            return sum(
                v
                for (n, labels), v in samples.items()
                if n == "mirrorplane_records_replicated_total" and dict(labels)["topic"] == unique_name
            )

        wait_until(lambda: replicated() == 400, timeout_s=90, what="400 records counted in /metrics")
        # Several gunicorn processes answer these scrapes: every one reports the same counters.
        assert {replicated() for _ in range(12)} == {400}

        def age_s() -> float:
            samples = _samples(requests.get(f"{web.url}/metrics", headers=auth, timeout=10).text)
            return samples[("mirrorplane_metrics_age_seconds", ())]

        # Scraped, the families are rendered ahead by the metadata worker (beat queues it every
        # METRICS_RENDER_INTERVAL_S) and served with their age; read by the scrape itself, the age is 0.
        wait_until(lambda: age_s() > 0, timeout_s=30, what="a scrape answered with the worker's rendering")

        def latency_histogram() -> dict:
            samples = _samples(requests.get(f"{web.url}/metrics", headers=auth, timeout=10).text)
            return {
                (n, dict(ls).get("le")): v
                for (n, ls), v in samples.items()
                if n.startswith("mirrorplane_record_replication_latency_seconds")
            }

        # Every acknowledged record lands in one latency bucket (the flow's heartbeats records too, if any).
        histogram = wait_until(
            lambda: (
                (h := latency_histogram()).get(
                    ("mirrorplane_record_replication_latency_seconds_count", None), 0
                )
                >= 400
                and h
            ),
            timeout_s=30,
            what="the latency histogram counting the records",
        )
        count = histogram[("mirrorplane_record_replication_latency_seconds_count", None)]
        assert histogram[("mirrorplane_record_replication_latency_seconds_bucket", "+Inf")] == count
        assert histogram[("mirrorplane_record_replication_latency_seconds_sum", None)] > 0

        def worker_figures() -> dict:
            samples = _samples(requests.get(f"{web.url}/metrics", headers=auth, timeout=10).text)
            return {
                n: v
                for (n, ls), v in samples.items()
                if n.startswith("mirrorplane_worker_") and "w1@" in dict(ls)["worker"]
            }

        # The worker's own figures come with its presence (every 5 s): its slices and the one task it holds.
        figures = wait_until(
            lambda: (f := worker_figures()).get("mirrorplane_worker_slices_total", 0) > 0 and f,
            timeout_s=30,
            what="the worker's slice count in /metrics",
        )
        assert figures["mirrorplane_worker_leases_held"] == 1 and figures["mirrorplane_worker_up"] == 1

        def series() -> list[dict]:
            try:
                answer = requests.get(
                    f"http://127.0.0.1:{port}/api/v1/query",
                    params={"query": f'mirrorplane_records_behind{{topic="{unique_name}"}}'},
                    timeout=5,
                ).json()
            except requests.RequestException:
                return []
            return answer["data"]["result"] if answer.get("status") == "success" else []

        def caught_up(rows: list[dict]) -> bool:
            return all(row["metric"]["flow"] == "A->B" and float(row["value"][1]) == 0 for row in rows)

        # Prometheus shows what its last scrape read: a scrape from while the copy was behind (it scrapes
        # from the start, every second) until its next one; on a loaded machine a scrape may come late.
        result = wait_until(
            lambda: len(rows := series()) == PARTITIONS and caught_up(rows) and rows,
            timeout_s=90,
            what="Prometheus showing every partition caught up",
        )
        assert {row["metric"]["partition"] for row in result} == {str(p) for p in range(PARTITIONS)}
        up = requests.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": "up"}, timeout=5).json()
        assert [float(row["value"][1]) for row in up["data"]["result"]] == [1.0]
    finally:
        server.terminate()
        server.wait(30)
        web.kill()
