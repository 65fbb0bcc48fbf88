"""Truthful live status with real workers: stop them while records keep arriving, and the API and pages
say the flow is stale with its age (never OK); start them again, and the lag they report has grown."""

from __future__ import annotations

import threading
import time

import pytest
from django.urls import reverse

from controlplane import assurance
from harness.runtime import PARTITIONS, create_topic, wait_until
from replication.kafka.clients import make_producer

pytestmark = pytest.mark.kafka

# A longest backoff of 4 s gives the stale limit room for a loaded machine (slices late by seconds must
# not read as stale here; the test is about workers that are gone).
SLICE_S, SUPERVISE_S, BACKOFF_S = 0.5, 0.5, 4.0
# The documented default rule: 3 slices + the supervise interval + the longest backoff.
STALE_AFTER_S = 3 * SLICE_S + SUPERVISE_S + BACKOFF_S


class SteadyProducer(threading.Thread):
    """Produces `per_tick` records every 0.1 s, round robin over the partitions, until stopped."""

    def __init__(self, cluster, topic: str, *, per_tick: int = 10) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic, self.per_tick = cluster, topic, per_tick
        self.stopped = threading.Event()
        self.produced = 0

    def run(self) -> None:
        producer = make_producer(self.cluster)
        while not self.stopped.is_set():
            for _ in range(self.per_tick):
                producer.produce(
                    self.topic, value=b"v%d" % self.produced, partition=self.produced % PARTITIONS
                )
                self.produced += 1
            producer.poll(0)
            time.sleep(0.1)
        producer.flush(30)

    def stop(self) -> None:
        self.stopped.set()
        self.join(60)


def test_stopped_workers_make_the_flow_stale_with_its_age_and_lag_grows_when_they_return(
    celery_runtime, make_flow, cluster_a, unique_name, client_as, settings
):
    settings.MIRRORPLANE_STALE_AFTER_S = STALE_AFTER_S
    celery_runtime.env.update(
        MIRRORPLANE_SLICE_SECONDS=str(SLICE_S),
        MIRRORPLANE_SUPERVISE_INTERVAL_S=str(SUPERVISE_S),
        MIRRORPLANE_BACKOFF_MAX_S=str(BACKOFF_S),
        # A slice copies at most 100 records: a backlog takes several slices, so reports show it.
        MIRRORPLANE_SLICE_MAX_RECORDS="100",
    )
    create_topic(cluster_a, unique_name)
    flow = make_flow(topics=[unique_name], tasks_max=1)
    # A backlog older than a second is over this budget: amber "behind" by the one health rule.
    assurance.rpo_budget_set(actor=None, flow=flow, seconds_behind=1.0, records_behind=None)
    viewer = client_as("viewer")

    def status() -> dict:
        return viewer.get(f"/api/v1/flows/{flow.pk}/status/").json()

    def own_behind(s: dict) -> int | None:
        """Records behind on this test's topic (the flow also mirrors a `heartbeats` topic that earlier
        tests' flows left on cluster A, whose figures are not the point here); None while one is unknown."""
        figures = [p["records_behind"] for p in s["partitions"]["results"] if p["topic"] == unique_name]
        return None if None in figures or not figures else sum(figures)

    producer = SteadyProducer(cluster_a, unique_name)
    producer.start()
    try:
        celery_runtime.start_worker("w1")
        celery_runtime.start_beat()
        seen: list[dict] = []

        def fresh_status() -> dict | bool:
            seen[:] = [status()]
            s = seen[0]
            # The flow also mirrors cluster A's `heartbeats` when an earlier test's flow wrote some there.
            mine = [p for p in s["partitions"]["results"] if p["topic"] == unique_name]
            known = own_behind(s) is not None
            return s["health"] in ("ok", "lagging") and len(mine) == PARTITIONS and known and s

        try:
            fresh = wait_until(fresh_status, timeout_s=90, what="fresh status of every partition")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last status: {seen}") from None
        assert fresh["stale"] is False and fresh["observed_at"] and fresh["age_s"] <= STALE_AFTER_S

        celery_runtime.stop("w1")
        stopped_at, produced_at_stop = time.monotonic(), producer.produced
        last_seen = status()
        stale = wait_until(
            lambda: (s := status())["stale"] and s,
            timeout_s=STALE_AFTER_S + 30,
            what="the flow reported stale",
        )
        detected_s = time.monotonic() - stopped_at
        print(f"stale reported {detected_s:.1f}s after the last worker stopped (limit {STALE_AFTER_S}s)")
        assert (stale["health"], stale["status"]) == ("stale", "STALE")
        assert stale["age_s"] > STALE_AFTER_S
        assert {p["state"] for p in stale["partitions"]["results"]} == {"STALE"}
        assert all(p["age_s"] > STALE_AFTER_S and p["observed_at"] for p in stale["partitions"]["results"])
        # Frozen figures: what the workers last measured, not updated while records keep arriving.
        assert stale["records_behind"] == last_seen["records_behind"]

        live = viewer.get("/api/v1/status/").json()
        assert live["replication"]["silent"] and live["replication"]["no_workers"]
        assert [(f["id"], f["health"], f["stale"]) for f in live["flows"]] == [(flow.pk, "stale", True)]
        overview = viewer.get(reverse("web:overview-live")).content.decode()
        assert "No replication worker has reported for" in overview
        assert 'class="edge stale"' in overview and "last seen" in overview
        page = viewer.get(reverse("web:flow-live", args=[flow.pk])).content.decode()
        assert "No replication worker has reported for" in page and "last seen" in page
        assert 'class="badge ok"' not in page

        # More records arrived while nobody replicated (the producer went on through the stale wait).
        wait_until(lambda: producer.produced >= produced_at_stop + 100, timeout_s=30, what="100 more records")
        celery_runtime.start_worker("w2")
        # The new task's first reports may know how many records are behind but not yet how old they are
        # (nothing replicated since it started): "waiting" then, by the one health rule, until it does.
        back = wait_until(
            lambda: (
                not (s := status())["stale"] and own_behind(s) is not None and s["health"] != "waiting" and s
            ),
            timeout_s=60,
            what="fresh status after the workers returned",
        )
        print(f"records_behind {own_behind(last_seen)} before the stop, {own_behind(back)} after")
        assert own_behind(back) > own_behind(last_seen) and back["health"] == "lagging", (
            {
                k: back[k]
                for k in ("health", "status", "records_behind", "seconds_behind", "seconds_behind_at_least")
            },
            [
                (p["topic"][-8:], p["partition"], p["records_behind"], p["seconds_behind"], p["state"])
                for p in back["partitions"]["results"]
            ],
        )
        # Unknown (None) until the new task has an acknowledged record to date the backlog by; never 0 then.
        assert back["seconds_behind"] is None or back["seconds_behind"] > 0
        assert "No replication worker" not in viewer.get(reverse("web:overview-live")).content.decode()
    finally:
        producer.stop()
