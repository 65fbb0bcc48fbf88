"""Issue 38 item 4: /metrics' families rendered ahead by the metadata worker (controlplane/metrics/rendered.py,
workers/exposition.py) while someone scrapes, served with their age, and read by the scrape itself when they
are missing, too old or Redis is away. Real Redis and PostgreSQL; transactional (the worker's task reads
committed rows and closes stale connections). tests/workers/test_metrics_endpoint.py runs it through beat, a
metadata worker and gunicorn with a real Prometheus."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from controlplane.core.shared_redis import redis_client
from controlplane.flows import services
from controlplane.metrics import rendered
from workers import exposition
from workers.cadence import Cadence

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "render-token-0123456789"


@pytest.fixture
def scrape(settings):
    settings.METRICS_BEARER_TOKEN = TOKEN
    settings.METRICS_RENDER_INTERVAL_S = 5
    settings.METRICS_RENDER_MAX_AGE_S = 60
    # Nothing rendered or wanted by an earlier test of this database.
    redis_client(timeout_s=2).delete(rendered._key("wanted"), rendered._key("exposition"))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    def get():
        response = client.get("/metrics")
        assert response.status_code == 200
        return response

    return get


def _age(response) -> float:
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    return families["mirrorplane_metrics_age_seconds"].samples[0].value


def _flow(admin, name: str):
    source = services.cluster_create(actor=admin, alias=f"{name}S", bootstrap_servers="s.invalid:9092")
    target = services.cluster_create(actor=admin, alias=f"{name}T", bootstrap_servers="t.invalid:9092")
    return services.flow_create(actor=admin, source=source, target=target, enabled=True)


def test_a_scrape_is_answered_with_what_the_worker_rendered_with_its_age(users, scrape):
    _flow(users["admin"], "Before")
    assert not exposition.render_exposition()  # nobody scraped yet: the worker reads nothing

    first = scrape()  # nothing rendered yet: read by the scrape itself, which asks the worker for more
    assert _age(first) == 0 and first["Age"] == "0" and 'flow="BeforeS->BeforeT"' in first.content.decode()
    assert exposition.render_exposition()

    _flow(users["admin"], "After")  # after the rendering: not in what is served until the next one
    time.sleep(1.1)
    served = scrape()
    text = served.content.decode()
    assert 'flow="BeforeS->BeforeT"' in text and 'flow="AfterS->AfterT"' not in text
    assert 1.0 <= _age(served) < 30 and int(served["Age"]) >= 1
    assert text.count("# TYPE mirrorplane_metrics_age_seconds gauge") == 1

    assert exposition.render_exposition()
    assert 'flow="AfterS->AfterT"' in scrape().content.decode()


def test_families_older_than_the_set_age_are_read_again_by_the_scrape(users, scrape, settings):
    scrape()
    assert exposition.render_exposition()
    _flow(users["admin"], "Later")
    settings.METRICS_RENDER_MAX_AGE_S = 0.5  # the worker stopped rendering: what it left ages past this
    time.sleep(0.6)
    fresh = scrape()
    assert _age(fresh) == 0 and 'flow="LaterS->LaterT"' in fresh.content.decode()


def test_off_every_scrape_reads_the_database_and_the_worker_renders_nothing(users, scrape, settings):
    settings.METRICS_RENDER_INTERVAL_S = 0
    scrape()
    assert not exposition.render_exposition()
    assert not exposition.dispatch_render(now=time.monotonic() + 10_000)
    _flow(users["admin"], "Now")
    assert 'flow="NowS->NowT"' in scrape().content.decode()


def test_without_redis_the_scrape_reads_the_database(users, scrape, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    _flow(users["admin"], "NoRedis")
    answer = scrape()
    assert _age(answer) == 0 and 'flow="NoRedisS->NoRedisT"' in answer.content.decode()
    assert "mirrorplane_redis_up 0.0" in answer.content.decode()
    assert not exposition.render_exposition()  # the worker logs it and reads nothing


def test_beat_queues_one_rendering_per_interval(settings):
    class Task:  # records what beat queues instead of sending it
        queued: list = []

        def apply_async(self, **options):
            self.queued.append(options)

    settings.METRICS_RENDER_INTERVAL_S = 5
    cadence = Cadence(Task(), lambda: settings.METRICS_RENDER_INTERVAL_S)
    assert cadence.dispatch(now=1000.0)
    assert not cadence.dispatch(now=1004.9)
    assert cadence.dispatch(now=1005.0)
    assert Task.queued == [{"expires": 5}, {"expires": 5}]
    settings.METRICS_RENDER_INTERVAL_S = 0
    assert not cadence.dispatch(now=2000.0)
    # beat's dispatch is this cadence over the worker's task
    assert exposition.dispatch_render.__self__.task is exposition.render_exposition


def test_the_stored_families_belong_to_one_database(users, scrape, monkeypatch):
    scrape()
    assert exposition.render_exposition()
    assert rendered.scraped() is not None
    monkeypatch.setitem(connection.settings_dict, "NAME", "another_installation")  # sharing the Redis
    assert rendered.scraped() is None
