"""Single sign-on's rules without a provider: the role map, the settings check, the sign-in service on the
provider's (already verified) claims, and the login pages' switches. The whole flow through a real
provider and Chromium is tests/e2e/test_sso.py."""

from __future__ import annotations

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from controlplane import core
from controlplane.core import sso
from controlplane.core.models import AuditEvent, SsoIdentity
from controlplane.core.outbound import GuardedAdapter
from controlplane.core.roles import Role, role_of
from controlplane.web import login
from tests.receiver import Listener

ISSUER = "https://idp.example.com/realms/kafka"


def test_the_role_map_gives_the_highest_role_of_the_groups_and_the_default_as_a_floor():
    role_map = sso.role_map_parse(["kafka-admins=admin", " kafka-oncall = operator ", "*=viewer", ""])
    assert role_map.default is Role.VIEWER
    assert sso.role_for_groups(groups=["kafka-oncall", "kafka-admins"], role_map=role_map) is Role.ADMIN
    assert sso.role_for_groups(groups=["kafka-oncall", "other"], role_map=role_map) is Role.OPERATOR
    assert sso.role_for_groups(groups=[], role_map=role_map) is Role.VIEWER
    strict = sso.role_map_parse(["/kafka/admins=admin"])  # Keycloak's full group paths are names too
    assert sso.role_for_groups(groups=["other"], role_map=strict) is None
    assert sso.role_for_groups(groups=["/kafka/admins"], role_map=strict) is Role.ADMIN


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["kafka-admins"], "'kafka-admins' is not group=role"),
        (["=admin"], "'=admin' is not group=role"),
        (["kafka-admins=boss"], "unknown role 'boss'; roles: viewer, operator, admin"),
        (["a=admin", "a=viewer"], "maps the group 'a' twice"),
    ],
)
def test_a_wrong_role_map_entry_is_named(entries, message):
    with pytest.raises(ValueError, match=message):
        sso.role_map_parse(entries)


def test_groups_come_as_a_list_or_a_single_name():
    assert sso.claim_groups({"groups": ["a", "b"]}, "groups") == ["a", "b"]
    assert sso.claim_groups({"roles": "a"}, "roles") == ["a"]
    assert sso.claim_groups({"groups": None}, "groups") == []
    assert sso.claim_groups({}, "groups") == []


def _oidc_on(settings, **extra):
    settings.MIRRORPLANE_OIDC_ENABLED = True
    settings.MIRRORPLANE_OIDC_ISSUER = ISSUER
    settings.MIRRORPLANE_OIDC_CLIENT_ID = "mirrorplane"
    settings.MIRRORPLANE_OIDC_CLIENT_SECRET = "do-not-show-me"
    settings.MIRRORPLANE_OIDC_ROLE_MAP = ["kafka-admins=admin", "kafka-readers=viewer"]
    for name, value in extra.items():
        setattr(settings, name, value)
    return sso.oidc_settings()


def test_settings_are_checked_and_off_by_default(settings):
    assert sso.oidc_settings() is None and sso.password_login_allowed()
    settings.MIRRORPLANE_OIDC_ENABLED = True
    with pytest.raises(ImproperlyConfigured, match="MIRRORPLANE_OIDC_ISSUER, MIRRORPLANE_OIDC_CLIENT_ID, "):
        sso.oidc_settings()
    oidc = _oidc_on(settings, MIRRORPLANE_OIDC_ISSUER=f"{ISSUER}/")
    assert oidc.discovery_url == f"{ISSUER}/.well-known/openid-configuration"
    assert "do-not-show-me" not in repr(oidc)  # the secret stays in the one place that sends it
    settings.MIRRORPLANE_OIDC_ROLE_MAP = ["kafka-admins=root"]
    with pytest.raises(ImproperlyConfigured, match="unknown role 'root'"):
        sso.oidc_settings()


@pytest.mark.django_db
def test_the_identity_is_the_issuer_and_subject_not_the_name(settings):
    oidc = _oidc_on(settings)
    claims = {"iss": ISSUER, "sub": "u-1", "preferred_username": "dana", "groups": ["kafka-admins"]}
    dana = sso.sso_sign_in(issuer=ISSUER, claims=claims, oidc=oidc)
    assert role_of(dana) is Role.ADMIN and not dana.has_usable_password()
    renamed = sso.sso_sign_in(
        issuer=ISSUER,
        claims={**claims, "preferred_username": "dana2", "groups": ["kafka-readers"]},
        oidc=oidc,
    )
    assert renamed.pk == dana.pk and role_of(renamed) is Role.VIEWER
    with pytest.raises(sso.SignInRefused, match="already named 'dana'"):
        sso.sso_sign_in(issuer="https://other.example.com", claims=claims, oidc=oidc)
    assert SsoIdentity.objects.count() == 1
    outcomes = list(
        AuditEvent.objects.filter(action="sign_in").order_by("id").values_list("outcome", flat=True)
    )
    assert outcomes == ["success", "success", "refused"]


@pytest.mark.django_db
def test_a_disabled_user_stays_out(settings):
    oidc = _oidc_on(settings)
    claims = {"sub": "u-2", "preferred_username": "erin", "groups": ["kafka-readers"]}
    erin = sso.sso_sign_in(issuer=ISSUER, claims=claims, oidc=oidc)
    get_user_model().objects.filter(pk=erin.pk).update(is_active=False)
    with pytest.raises(sso.SignInRefused, match="disabled"):
        sso.sso_sign_in(issuer=ISSUER, claims=claims, oidc=oidc)


@pytest.mark.django_db
def test_the_login_page_without_single_sign_on_has_no_provider_button(settings):
    page = Client().get("/login/").content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    assert Client().get("/login/sso/").status_code == 404


@pytest.mark.django_db
def test_passwords_can_be_turned_off(settings, users):
    _oidc_on(settings, MIRRORPLANE_OIDC_PASSWORD_LOGIN=False, MIRRORPLANE_OIDC_PROVIDER_NAME="Keycloak")
    users["admin"].set_password("a-long-test-password-0123")
    users["admin"].save()
    page = Client().get("/login/").content.decode()
    assert "Sign in with Keycloak" in page and 'name="password"' not in page
    client = Client()
    refused = client.post("/login/", {"username": "admin", "password": "a-long-test-password-0123"})
    assert (
        refused.status_code == 403 and "MIRRORPLANE_OIDC_PASSWORD_LOGIN is false" in refused.content.decode()
    )
    assert "_auth_user_id" not in client.session
    admin_login = Client().get("/admin/login/")
    assert admin_login.status_code == 302 and admin_login["Location"] == "/login/?next=/admin/"
    settings.MIRRORPLANE_OIDC_PASSWORD_LOGIN = True
    assert Client().get("/admin/login/").status_code == 200


@pytest.mark.django_db
def test_a_provider_refusal_or_a_stray_answer_is_a_page_not_an_error(settings):
    _oidc_on(settings, MIRRORPLANE_OIDC_PROVIDER_NAME="Okta")
    denied = Client().get(
        "/login/sso/callback/", {"error": "access_denied", "error_description": "<b>no</b>"}
    )
    assert denied.status_code == 403
    assert "Okta answered access_denied (its log" in denied.content.decode()
    assert "&lt;b&gt;no" not in denied.content.decode()  # the provider's free text is not ours to show
    stray = Client().get("/login/sso/callback/", {"code": "abc", "state": "not-ours"})
    assert stray.status_code == 400 and "This sign-in expired" in stray.content.decode()
    assert "do-not-show-me" not in denied.content.decode() + stray.content.decode()


@pytest.mark.django_db
def test_admins_see_which_identity_signs_in_as_whom(settings, users):
    oidc = _oidc_on(settings)
    claims = {"sub": "u-3", "preferred_username": "fay", "groups": ["kafka-readers"]}
    sso.sso_sign_in(issuer=ISSUER, claims=claims, oidc=oidc)
    superuser = users["admin"]
    superuser.is_superuser = True  # the read-only admin pages' view permission
    superuser.save()
    client = Client()
    client.force_login(superuser)
    page = client.get("/admin/controlplane/ssoidentity/")
    assert page.status_code == 200 and "u-3" in page.content.decode() and ISSUER in page.content.decode()


@pytest.mark.django_db
def test_a_session_ends_session_cookie_age_after_its_sign_in_whatever_it_did_since(settings, users):
    """SESSION_COOKIE_AGE restarts whenever the session is saved again; the sign-in's age does not, so a
    browser left open does not keep a role (an identity provider's user asks the provider again)."""
    client = Client()
    client.force_login(users["viewer"])
    assert client.get("/flows/").status_code == 200
    session = client.session
    session["signed_in_at"] -= settings.SESSION_COOKIE_AGE + 1  # signed in longer ago than the age
    session.save()
    answer = client.get("/flows/")
    assert answer.status_code == 302 and answer["Location"].startswith("/login/")
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
@pytest.mark.parametrize("cookie", ["\x00", "abc\x00def1234567890", "../../etc/passwd", "A" * 32])
def test_a_crafted_session_cookie_names_no_session_and_is_never_a_500(db, cookie):
    """A session cookie Django could not have made (a NUL byte made PostgreSQL refuse the session lookup:
    a 500 on every endpoint that reads the session) is no session: the API answers by its token."""
    client = Client()
    client.cookies["sessionid"] = cookie
    assert client.get("/login/").status_code == 200
    assert client.get("/flows/").status_code == 302  # to the login page
    _, token = core.user_create_with_role(username="reader", role=Role.VIEWER)
    api = client.get("/api/v1/flows/", HTTP_AUTHORIZATION=f"Token {token}")
    assert api.status_code == 200, api.content[:300]


def test_the_providers_connections_are_checked_as_they_connect_not_only_their_urls(settings):
    """Issue 35 item 1: the single sign-on client's requests go through the outbound policy at connect
    time too (`GuardedAdapter`), so a name that resolves elsewhere after its URL was checked (DNS
    rebinding) is not followed there: an address the list does not allow gets no connection."""
    assert isinstance(login._PolicedSession().get_adapter("https://idp.example/"), GuardedAdapter)
    session = requests.Session()  # the adapter alone: no URL check before it
    for scheme in ("http://", "https://"):
        session.mount(scheme, GuardedAdapter())
    with Listener(host="127.0.0.3") as hostile:
        settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = ["127.0.0.1"]
        with pytest.raises(requests.ConnectionError, match="127.0.0.3"):
            session.get(f"{hostile.url}/.well-known/openid-configuration", timeout=5)
        assert hostile.heard == []
        settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = ["127.0.0.3"]
        assert session.get(f"{hostile.url}/.well-known/openid-configuration", timeout=5).status_code == 200
        assert [heard.path for heard in hostile.heard] == ["/.well-known/openid-configuration"]
