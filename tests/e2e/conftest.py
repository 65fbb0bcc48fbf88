"""Browser tests: Debian's Chromium driven by Playwright against pytest-django's live server, with the
session's embedded Kafka clusters and real Celery worker processes (the workers tests' harness)."""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.utils import timezone
from playwright.sync_api import Page, expect

from controlplane import core
from controlplane.core.roles import Role
from controlplane.status.models import PartitionState
from tests.conftest import web_reads_wait_for_a_loaded_machine
from tests.status_reports import stored_report

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make are still
# synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"
# A Redis database of its own (the workers tests flush theirs).
E2E_REDIS_URL = os.environ.get("MIRRORPLANE_E2E_REDIS_URL", "redis://127.0.0.1:6379/14")


PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _web_reads_wait_for_a_loaded_machine(settings):
    web_reads_wait_for_a_loaded_machine(settings)  # the live server runs in this process


@pytest.fixture
def signed_in(page, live_server):
    """An administrator logged in through the login page; the live server's URL."""
    core.user_create_with_role(username="e2e-admin", role=Role.ADMIN, password=PASSWORD)
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("e2e-admin")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Clusters")).to_be_visible()
    return live_server.url


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make chromium)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1360, "height": 900}, "timezone_id": "UTC"}


# Elements reaching past the screen's right edge, outside any box that scrolls them (tag#id.class).
WIDER_THAN_SCREEN = """() => {
  const scrolls = (e) => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
    const s = getComputedStyle(p); if (s.overflowX === 'auto' || s.overflowX === 'scroll') return true; }
    return false; };
  return [...document.body.querySelectorAll('*')].filter((e) => e.getBoundingClientRect().right > innerWidth + 1
    && getComputedStyle(e).position !== 'fixed' && !scrolls(e)).slice(0, 5)
    .map((e) => e.tagName + (e.id ? '#' + e.id : '') + '.' + (e.getAttribute('class') || '') + '@' + Math.round(e.getBoundingClientRect().right));
}"""


def partition_report(flow, *, age_s: float, behind: int, seconds: float, state=None) -> None:
    """A worker's report of partition 0 of `orders` for `flow`, `age_s` old, `behind` records and
    `seconds` behind (state OK unless given)."""
    stored_report(
        flow=flow,
        topic="orders",
        partition=0,
        remote_topic=f"{flow.source.alias}.orders",
        replicated_offset=100,
        source_end_offset=100 + behind,
        records_behind=behind,
        seconds_behind=seconds,
        record_rate=0.0,
        state=state or PartitionState.OK,
        observed_at=timezone.now() - timedelta(seconds=age_s),
    )


@contextlib.contextmanager
def kept(page: Page, name: str):
    """Screenshot the page under tests/e2e/artifacts/: `name`.png on success, `name`-FAILED.png on a failure."""
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        yield
    except BaseException:
        page.screenshot(path=ARTIFACTS / f"{name}-FAILED.png", full_page=True)
        raise
    page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)


@pytest.fixture
def screenshot(page):
    """screenshot("flows") saves the full page under tests/e2e/artifacts/ for a person to look at."""
    ARTIFACTS.mkdir(exist_ok=True)

    def take(name: str) -> None:
        page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)

    return take


@pytest.fixture
def celery_runtime(live_server, settings, tmp_path):
    """A Celery worker and beat on the live server's database (its rows are committed)."""
    from harness.runtime import CeleryRuntime
    from workers import context

    client = redis.Redis.from_url(E2E_REDIS_URL)
    client.flushdb()
    settings.REDIS_URL = E2E_REDIS_URL
    # The web and the workers share one cache, as in production (REDIS_URL): the failover page asks the
    # operations workers for its plan through it.
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": E2E_REDIS_URL}}
    context.leases.cache_clear()
    runtime = CeleryRuntime(workdir=tmp_path, redis_url=E2E_REDIS_URL)
    yield runtime
    runtime.close()
    context.leases.cache_clear()
    client.flushdb()
    client.close()
