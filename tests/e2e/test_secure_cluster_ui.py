"""A cluster secured as production secures it (SASL_SSL with SCRAM-SHA-512, a test CA, Kafka's
authorizer) added through the cluster form in Chromium: its check answers, a wrong password is named
without being shown, and the message browser reads its records; the password never comes back."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import SCRAM_USERS
from tests.failover.conftest import create_topic, produce_plain

pytestmark = [pytest.mark.kafka, pytest.mark.e2e]


def _add_secure_cluster(page: Page, base: str, alias: str, bootstrap: str, *, password: str, ca: str) -> None:
    page.goto(f"{base}/clusters/new/")
    page.get_by_label("Alias").fill(alias)
    page.get_by_label("Bootstrap servers").fill(bootstrap)
    page.get_by_label("Security protocol").select_option("SASL_SSL")
    page.get_by_label("SASL mechanism").select_option("SCRAM-SHA-512")
    page.get_by_label("sasl.username").fill("admin")
    page.get_by_label("sasl.password").fill(password)
    page.get_by_label("ssl.ca.pem").fill(ca)
    page.get_by_role("button", name="Add cluster").click()
    expect(page.get_by_text(f"Cluster {alias} created.")).to_be_visible()


def test_a_sasl_ssl_cluster_through_the_form_checks_browses_and_never_shows_its_password(
    page: Page, signed_in: str, secure_clusters, unique_name, screenshot
):
    base, password, wrong = signed_in, SCRAM_USERS["admin"], f"wrong-{unique_name}"
    topic = f"secure-{unique_name}"
    source = secure_clusters.config("A")
    create_topic(source, topic, 1)
    produce_plain(source, topic, partitions=1, count=5, tag="secured")

    bootstrap = secure_clusters.brokers["A"].bootstrap_servers
    _add_secure_cluster(page, base, "A", bootstrap, password=password, ca=secure_clusters.ca_pem)
    _add_secure_cluster(page, base, "Ax", bootstrap, password=wrong, ca=secure_clusters.ca_pem)
    page.goto(f"{base}/clusters/")
    rows = page.locator("tr", has=page.get_by_role("link", name="A", exact=True))
    rows.get_by_role("button", name="Test connection").click()
    expect(page.get_by_text("A answered")).to_be_visible(timeout=30_000)
    refused = page.locator("tr", has=page.get_by_role("link", name="Ax", exact=True))
    refused.get_by_role("button", name="Test connection").click()
    expect(page.get_by_role("alert").filter(has_text="sasl.password")).to_be_visible(timeout=30_000)
    screenshot("secure-cluster-checks")

    page.goto(f"{base}/topics/A/{topic}/")
    expect(page.locator("pre.bytes").first).to_contain_text("secured-p0-0", timeout=30_000)
    screenshot("secure-cluster-records")

    for path in ("/clusters/", f"/topics/A/{topic}/"):
        page.goto(f"{base}{path}")
        assert password not in page.content() and wrong not in page.content()
    page.goto(f"{base}/clusters/")
    page.get_by_role("link", name="A", exact=True).click()
    assert password not in page.content()
