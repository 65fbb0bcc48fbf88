"""`make demo`'s log at INFO tells a story: a worker process started as the docs say does not log a line
per task received / succeeded (every replication slice is a task), but a failing task stays visible."""

from __future__ import annotations

import pytest
from celery import Celery

from harness.runtime import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_worker_logs_task_failures_but_not_every_task(celery_runtime):
    # A sender on the worker's broker (workers.app keeps the broker of the first test that imported it).
    app = Celery("log-story-sender", broker=celery_runtime.env["REDIS_URL"])

    celery_runtime.start_worker("story", queues="metadata", concurrency=1)
    # One worker thread: the task that succeeds (no such flow: nothing to do) runs before the one that fails.
    app.send_task("workers.tasks.flow_metadata", args=[987654, "token"], queue="metadata")
    app.send_task("workers.tasks.flow_metadata", args=[], queue="metadata")  # TypeError: missing arguments

    log = wait_until(
        lambda: (text := celery_runtime.log("story")) and "raised unexpected" in text and text,
        timeout_s=60,
        what="the failing task in the worker's log",
    )
    assert "TypeError" in log
    assert "succeeded in" not in log
    assert "] received" not in log
    assert "INFO" in log  # the worker's own INFO lines (ready, presence) are still there


def test_chatty_library_loggers_are_below_info_by_default():
    """The levels the settings give every process (workers configure logging from them too)."""
    import logging

    for name in ("celery.app.trace", "celery.worker.strategy", "py4j"):
        assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING, name
