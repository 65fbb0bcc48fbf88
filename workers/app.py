"""The Celery app: `celery -A workers.app worker` / `celery -A workers.app beat`.

Configuration comes from Django settings (`CELERY_*`, see controlplane/settings_runtime.py); the broker
is REDIS_URL. Queues: `replication` (slices), `metadata` (supervisor, topic sync, heartbeats,
checkpoints, alert evaluation, verification), `reports` (Spark jobs), `operations` (failover, failback), plus each worker's own queue for its chains' next slices.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

from django.conf import settings

app = Celery("mirrorplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.broker_url = settings.REDIS_URL
app.conf.include = [
    "workers.tasks",
    "workers.reports",
    "workers.operations",
    "workers.alerts",
    "workers.verification",
    "workers.exposition",
]
