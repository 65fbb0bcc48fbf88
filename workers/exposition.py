"""/metrics rendered ahead on the `metadata` queue (controlplane.metrics.rendered), dispatched by beat.

Beat queues `render_exposition` every METRICS_RENDER_INTERVAL_S (`dispatch_render`, at the supervisor's
cadence; the message expires after one interval, so a backlog behind a busy or stopped worker never runs
twice). The task renders only while someone scrapes: with no scrape for `rendered.WANTED_FOR_S` it reads
nothing. A worker that is away leaves the stored families to age past METRICS_RENDER_MAX_AGE_S, and the
web's scrapes then read the database themselves.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import close_old_connections
from redis import RedisError

from controlplane.metrics import prometheus, rendered
from workers.app import app
from workers.cadence import Cadence

log = logging.getLogger(__name__)


@app.task(name="workers.exposition.render_exposition", ignore_result=True)
def render_exposition() -> bool:
    """Render /metrics' families into Redis when someone scraped lately; True when it rendered."""
    try:
        if not rendered.on() or not rendered.wanted():
            return False
        close_old_connections()
        read_at = time.time()
        started = time.monotonic()
        text = prometheus.families()
        rendered.store(text, read_at=read_at)
    except RedisError as error:  # the scrapes read the database themselves meanwhile
        log.warning("/metrics not rendered ahead (Redis): %s", error)
        return False
    log.debug("/metrics rendered: %d bytes in %.3f s", len(text), time.monotonic() - started)
    return True


# Beat: a rendering every METRICS_RENDER_INTERVAL_S (none when 0); True when one was queued.
dispatch_render = Cadence(render_exposition, lambda: settings.METRICS_RENDER_INTERVAL_S).dispatch
