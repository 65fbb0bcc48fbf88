"""Single sign-on (issue 27 item 12) in a real Chromium: the console under gunicorn as the Dockerfile runs it,
signing people in through a real OpenID Connect provider (django-oauth-toolkit, tests/oidc_provider) in
its own process. The role follows the provider's groups at every sign-in; an unmapped user is refused;
a wrong client secret or an issuer that does not answer is a clear page; the secret shows nowhere."""

from __future__ import annotations

import datetime
import re
import secrets

import pytest
import requests
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Page, expect

from controlplane import core
from controlplane.core.models import AuditEvent
from controlplane.core.roles import Role, role_of
from harness.runtime import Gunicorn, sign_in
from replication.kafka.processes import free_port
from tests.oidc_provider.server import OidcProvider
from tests.web.served import web_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROVIDER = "Test IdP"
ROLE_MAP = "kafka-admins=admin,kafka-oncall=operator,kafka-readers=viewer"
SECRET = f"sso-client-secret-{secrets.token_hex(12)}"
WRONG_SECRET = f"sso-wrong-secret-{secrets.token_hex(12)}"
PROVIDER_PASSWORD = "provider-password-0123"


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    server = OidcProvider(workdir=tmp_path_factory.mktemp("oidc-provider")).start()
    yield server
    server.stop()


def _sso_web(tmp_path_factory, name: str, *, issuer: str, secret: str) -> Gunicorn:
    env = web_env(
        MIRRORPLANE_OIDC_ENABLED="true",
        MIRRORPLANE_OIDC_ISSUER=issuer,
        MIRRORPLANE_OIDC_CLIENT_ID=f"mirrorplane-{name}",
        MIRRORPLANE_OIDC_CLIENT_SECRET=secret,
        MIRRORPLANE_OIDC_SCOPES="openid profile email groups",
        MIRRORPLANE_OIDC_ROLE_MAP=ROLE_MAP,
        MIRRORPLANE_OIDC_PROVIDER_NAME=PROVIDER,
        LOG_LEVEL="DEBUG",  # every line the console could write: none may hold the secret
    )
    return Gunicorn(env=env, log=tmp_path_factory.mktemp(f"web-{name}") / "gunicorn.log").start()


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory, provider):
    """The console with single sign-on through the provider, its client registered there."""
    with django_db_blocker.unblock():
        server = _sso_web(tmp_path_factory, "ok", issuer=provider.issuer, secret=SECRET)
    provider.client("mirrorplane-ok", secret=SECRET, redirect_uris=[f"{server.url}/login/sso/callback/"])
    yield server
    server.kill()


def _user(name: str):
    return get_user_model().objects.filter(username=name).first()


def _sso_sign_in(page: Page, web: Gunicorn, username: str, *, provider_asks: bool = True) -> None:
    """From the console's login page through the provider's (which asks for a password once a browser)."""
    page.goto(f"{web.url}/login/")
    page.get_by_role("link", name=f"Sign in with {PROVIDER}").click()
    if provider_asks:
        expect(page.get_by_role("heading", name="Test identity provider")).to_be_visible()
        page.get_by_label("Provider username").fill(username)
        page.get_by_label("Provider password").fill(PROVIDER_PASSWORD)
        page.get_by_role("button", name="Continue").click()


def _log_out(page: Page) -> None:
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login/$"))


def _sign_in_audit(username: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="sign_in", actor_name=username).order_by("id"))


def _assert_secret_nowhere(page_texts: list[str], *logs) -> None:
    for text in [*page_texts, *(log.read_text() for log in logs)]:
        assert SECRET not in text and WRONG_SECRET not in text
    for event in AuditEvent.objects.all():
        assert SECRET not in f"{event.detail} {event.before} {event.after} {event.object_repr}"


def test_the_login_page_offers_the_provider_and_keeps_passwords(page: Page, web, screenshot):
    page.goto(f"{web.url}/login/")
    expect(page.get_by_role("link", name=f"Sign in with {PROVIDER}")).to_be_visible()
    screenshot("sso-login")
    # MIRRORPLANE_OIDC_PASSWORD_LOGIN's default: local accounts still sign in.
    expect(page.get_by_label("Password", exact=True)).to_be_visible()


def test_an_admin_group_member_signs_in_as_admin_and_is_demoted_when_the_group_goes(
    page: Page, web, provider
):
    provider.user("alice", password=PROVIDER_PASSWORD, groups=["kafka-admins", "staff"])
    page.goto(f"{web.url}/flows/")  # a page that needs signing in: back there afterwards
    page.get_by_role("link", name=f"Sign in with {PROVIDER}").click()
    page.get_by_label("Provider username").fill("alice")
    page.get_by_label("Provider password").fill(PROVIDER_PASSWORD)
    page.get_by_role("button", name="Continue").click()
    expect(page).to_have_url(f"{web.url}/flows/")
    expect(page.locator("header .role")).to_have_text("admin")
    alice = _user("alice")
    assert role_of(alice) is Role.ADMIN and alice.is_staff and not alice.has_usable_password()
    pages = [page.content()]

    provider.user("alice", password=PROVIDER_PASSWORD, groups=["kafka-readers"])
    _log_out(page)
    _sso_sign_in(page, web, "alice", provider_asks=False)  # the provider remembers her
    expect(page.locator("header .role")).to_have_text("viewer")
    alice.refresh_from_db()
    assert role_of(alice) is Role.VIEWER and not alice.is_staff
    pages.append(page.content())

    provider.user("alice", password=PROVIDER_PASSWORD, groups=["staff"])  # no mapped group left
    _log_out(page)
    _sso_sign_in(page, web, "alice", provider_asks=False)
    expect(page.get_by_role("heading", name="You may not sign in here")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("No role for the groups staff")
    assert role_of(_user("alice")) is None  # the admin role she had is gone, API token included
    page.goto(f"{web.url}/flows/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/flows/$"))  # not signed in
    pages.append(page.content())

    events = _sign_in_audit("alice")
    assert [(e.outcome, (e.after or {}).get("role")) for e in events] == [
        ("success", "admin"),
        ("success", "viewer"),
        ("refused", None),
    ]
    assert events[1].before == {"role": "admin"} and "kafka-readers" in events[1].detail
    assert "the viewer role they had is taken away" in events[2].detail
    assert "no role for the groups staff" in events[2].detail
    _assert_secret_nowhere(pages, web.log)


def test_a_viewer_group_member_signs_in_as_viewer_and_a_write_is_refused_and_audited(
    page: Page, web, provider
):
    provider.user("victor", password=PROVIDER_PASSWORD, groups=["kafka-readers"])
    _sso_sign_in(page, web, "victor")
    expect(page.locator("header .role")).to_have_text("viewer")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(
        f"{web.url}/clusters/new/",
        form={"csrfmiddlewaretoken": csrf, "alias": "X", "bootstrap_servers": "x.invalid:9092"},
        headers={"Referer": f"{web.url}/clusters/new/"},
    )
    assert answer.status == 403, answer.text()[:300]
    refusal = AuditEvent.objects.get(actor_name="victor", outcome="refused")
    assert refusal.action == "create" and "needs the admin role; has the viewer role" in refusal.detail
    assert [e.outcome for e in _sign_in_audit("victor")] == ["success"]


def test_a_user_in_no_mapped_group_is_refused_with_a_clear_page(page: Page, web, provider, screenshot):
    provider.user("mallory", password=PROVIDER_PASSWORD, groups=["marketing"])
    _sso_sign_in(page, web, "mallory")
    expect(page.get_by_role("heading", name="You may not sign in here")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("No role for the groups marketing")
    screenshot("sso-refused")
    assert _user("mallory") is None  # nobody is created for a refused sign-in
    [refusal] = _sign_in_audit("mallory")
    assert refusal.outcome == "refused" and "marketing" in refusal.detail
    page.goto(f"{web.url}/")
    expect(page).to_have_url(re.compile(r"/login/"))
    _assert_secret_nowhere([page.content()], web.log)


def test_a_local_account_is_not_taken_over_by_a_provider_user_of_the_same_name(page: Page, web, provider):
    local, _ = get_user_model().objects.get_or_create(username="carol")
    provider.user("carol", password=PROVIDER_PASSWORD, groups=["kafka-admins"])
    _sso_sign_in(page, web, "carol")
    expect(page.get_by_role("alert")).to_contain_text("already named 'carol'")
    assert role_of(local) is None
    assert [e.outcome for e in _sign_in_audit("carol")] == ["refused"]


def test_a_wrong_client_secret_is_a_clear_page_that_shows_no_secret(
    page: Page, provider, tmp_path_factory, transactional_db, screenshot
):
    web = _sso_web(tmp_path_factory, "wrong", issuer=provider.issuer, secret=WRONG_SECRET)
    try:
        provider.client("mirrorplane-wrong", secret=SECRET, redirect_uris=[f"{web.url}/login/sso/callback/"])
        provider.user("alice", password=PROVIDER_PASSWORD, groups=["kafka-admins"])
        _sso_sign_in(page, web, "alice")
        expect(page.get_by_role("heading", name="The identity provider refused this console")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text("invalid_client")
        expect(page.get_by_text("MIRRORPLANE_OIDC_CLIENT_SECRET")).to_be_visible()
        screenshot("sso-wrong-secret")
        assert _user("alice") is None
        _assert_secret_nowhere([page.content()], web.log)
    finally:
        web.kill()


def test_an_issuer_that_does_not_answer_is_a_clear_page(page: Page, tmp_path_factory, transactional_db):
    nowhere = f"http://127.0.0.1:{free_port()}/o"
    web = _sso_web(tmp_path_factory, "unreachable", issuer=nowhere, secret=SECRET)
    try:
        page.goto(f"{web.url}/login/")
        with page.expect_response(re.compile(r"/login/sso/")) as answer:
            page.get_by_role("link", name=f"Sign in with {PROVIDER}").click()
        assert answer.value.status == 502
        expect(page.get_by_role("heading", name="The identity provider did not answer")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text(nowhere)
        expect(page.get_by_role("alert")).to_contain_text("the connection failed")
        pages = [page.content()]
        # The first failure opens the provider's breaker for every web process: the next sign-ins are
        # answered at once, saying so.
        for _ in range(2):
            page.get_by_role("link", name=f"Sign in with {PROVIDER} again").click()
            expect(page.get_by_role("heading", name="The identity provider did not answer")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text("it did not answer the last 1 requests")
        expect(page.get_by_role("alert")).to_contain_text("it is asked again in")
        _assert_secret_nowhere([*pages, page.content()], web.log)
    finally:
        web.kill()


def test_a_provider_that_is_not_the_configured_issuer_is_a_clear_page(provider, settings, client):
    """The discovery document must name the issuer configured (OpenID Connect Discovery): a provider at
    another address, or an issuer with a path left out, is said so before anyone is sent there."""
    settings.MIRRORPLANE_OIDC_ENABLED = True
    settings.MIRRORPLANE_OIDC_ISSUER = f"{provider.url}/realms/kafka"
    settings.MIRRORPLANE_OIDC_DISCOVERY_URL = f"{provider.issuer}/.well-known/openid-configuration"
    settings.MIRRORPLANE_OIDC_CLIENT_ID = "mirrorplane-ok"
    settings.MIRRORPLANE_OIDC_CLIENT_SECRET = SECRET
    settings.MIRRORPLANE_OIDC_ROLE_MAP = ROLE_MAP.split(",")
    answer = client.get("/login/sso/")
    page = answer.content.decode()
    assert answer.status_code == 502, page[:500]
    assert "The identity provider is not the one configured" in page
    assert f"names the issuer &#x27;{provider.issuer}&#x27;" in page and SECRET not in page


# -- issue 35 item 5: leaving the identity provider removes access ---------------------------------------
def test_an_sso_admin_who_is_disabled_loses_the_session_and_the_api_token_at_once(page: Page, web, provider):
    """Before: an SSO admin minted a 90-day API token, and the token and the session stayed admin after
    they left the provider; admins could not disable a user in /admin/ (403). Now the token lasts
    MIRRORPLANE_OIDC_API_TOKEN_TTL_HOURS (8), and an admin's "Disable" in /admin/ ends both at once."""
    provider.user("olga", password=PROVIDER_PASSWORD, groups=["kafka-admins"])
    _sso_sign_in(page, web, "olga")
    expect(page.locator("header .role")).to_have_text("admin")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    minted = page.request.post(
        f"{web.url}/api/v1/tokens/rotate/", headers={"X-CSRFToken": csrf, "Referer": f"{web.url}/"}
    )
    assert minted.status == 201, minted.text()[:300]
    token = minted.json()
    lasts = datetime.datetime.fromisoformat(token["expires_at"]) - timezone.now()
    assert datetime.timedelta(hours=7) < lasts <= datetime.timedelta(hours=8)
    olga_api = {"Authorization": f"Token {token['token']}"}
    assert requests.get(f"{web.url}/api/v1/flows/", headers=olga_api, timeout=10).status_code == 200

    core.user_create_with_role(username="root", role=Role.ADMIN, password=PROVIDER_PASSWORD)
    root = sign_in(web.url, username="root", password=PROVIDER_PASSWORD)
    users_page = root.get(f"{web.url}/admin/auth/user/", timeout=10)
    assert users_page.status_code == 200 and "olga" in users_page.text, users_page.text[:300]
    olga = _user("olga")
    disabled = root.post(
        f"{web.url}/admin/auth/user/",
        data={
            "action": "disable",
            "_selected_action": [olga.pk],
            "csrfmiddlewaretoken": root.cookies["csrftoken"],
        },
        headers={"Referer": f"{web.url}/admin/auth/user/"},
        timeout=10,
    )
    assert disabled.status_code == 200 and "User olga disabled" in disabled.text, disabled.text[:500]

    answer = requests.get(f"{web.url}/api/v1/flows/", headers=olga_api, timeout=10)
    assert answer.status_code == 401, answer.text[:300]
    page.goto(f"{web.url}/flows/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/flows/$"))  # the session ended
    _sso_sign_in(page, web, "olga", provider_asks=False)
    expect(page.get_by_role("alert")).to_contain_text("This account is disabled here")
    [event] = AuditEvent.objects.filter(object_type="user", action="update", object_repr="olga")
    assert (event.actor_name, event.after) == ("root", {"active": False})


def test_a_provider_username_with_a_right_to_left_override_is_refused_and_audited_escaped(
    page: Page, web, provider
):
    """Before: a right-to-left override in the provider's username reached the audit log as it was."""
    spoofed = "mallet\u202egnp.exe"
    provider.user(spoofed, password=PROVIDER_PASSWORD, groups=["kafka-readers"])
    _sso_sign_in(page, web, spoofed)
    expect(page.get_by_role("alert")).to_contain_text("U+202E")
    assert _user(spoofed) is None
    refusal = AuditEvent.objects.get(action="sign_in", outcome="refused", actor_name="mallet\\u202egnp.exe")
    assert "\u202e" not in f"{refusal.actor_name}{refusal.object_repr}{refusal.detail}"


def test_the_providers_error_text_is_not_printed_as_ours(page: Page, web):
    page.goto(
        f"{web.url}/login/sso/callback/?error=access_denied&error_description=Call+0800+to+restore+access"
    )
    expect(page.get_by_role("alert")).to_contain_text(f"{PROVIDER} answered access_denied")
    assert "0800" not in page.content()
    page.goto(f"{web.url}/login/sso/callback/?error=Your+account+is+locked.+Call+0800")
    expect(page.get_by_role("alert")).to_contain_text(f"{PROVIDER} answered an error")
    assert "0800" not in page.content()
