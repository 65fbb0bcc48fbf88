"""Browser tests: Debian's Chromium driven by Playwright against pytest-django's live server, with the
session's embedded Kafka clusters and real Celery worker processes (the workers tests' harness)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
import redis
from playwright.sync_api import Page, expect

from controlplane import core
from controlplane.core.roles import Role

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make are still
# synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"
# A Redis database of its own (the workers tests flush theirs).
E2E_REDIS_URL = os.environ.get("MIRRORPLANE_E2E_REDIS_URL", "redis://127.0.0.1:6379/14")


PASSWORD = "correct horse battery staple"


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
    from tests.workers.harness import CeleryRuntime
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
