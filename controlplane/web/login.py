"""Signing in and out: the local username and password, and single sign-on through an OpenID Connect
provider (docs/sso.md).

"Sign in with <provider>" sends the browser to the provider (authorization code flow with PKCE, state and
nonce, Authlib's client reading the provider's discovery document); the provider sends it back to the
callback, which verifies the ID token (signature by the provider's published keys, issuer, audience,
nonce, expiry) and signs the user in with the role their groups give (controlplane.core.sso). A provider
that does not answer, refuses our client or sends a token that does not verify is a page saying so and
naming the setting to check (502), never a 500; the client secret is never shown nor logged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

import requests
from authlib.integrations.base_client import MismatchingStateError, OAuthError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
from authlib.integrations.requests_client import OAuth2Session
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login as auth_login
from django.contrib.auth import views as auth_views
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from joserfc.errors import JoseError

from controlplane.core import call_bounds, sso
from controlplane.core.outbound import GuardedAdapter, outbound_url_error

T = TypeVar("T")

_log = logging.getLogger(__name__)

_NEXT = "sso_next"  # the page asked for before signing in, kept in the session across the provider's pages


class _LoginView(auth_views.LoginView):
    template_name = "web/login.html"
    next_page = "web:overview"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "sso": sso.oidc_settings(),
            "password_login": sso.password_login_allowed(),
        }

    def post(self, request, *args, **kwargs):
        if not sso.password_login_allowed():
            return _error(
                request,
                status=403,
                title="Passwords do not sign in here",
                message="This console signs people in through its identity provider only "
                "(MIRRORPLANE_OIDC_PASSWORD_LOGIN is false).",
            )
        return super().post(request, *args, **kwargs)


login = _LoginView.as_view()
logout = auth_views.LogoutView.as_view(next_page="web:login")


def admin_login(request):
    """The admin site's login page, unless passwords are turned off: then the console's login page."""
    if sso.password_login_allowed():
        return admin.site.login(request)
    return redirect(f"{reverse('web:login')}?next={reverse('admin:index')}")


# -- single sign-on ---------------------------------------------------------------------------------------
class OutboundRefused(requests.RequestException):
    """A request to the provider that the outbound policy (`replication.outbound`, docs/security.md) does
    not allow was not made, or a redirect it answered with was not followed."""


class _PolicedSession(OAuth2Session):
    """Every request to the provider (its discovery document, token endpoint, keys, userinfo) under the
    outbound policy: the URL checked (scheme, host, resolved addresses: the discovery document names the
    others), no redirect followed (the client secret and codes go to the named origin only)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for scheme in ("http://", "https://"):  # each address checked as it is connected to, too
            self.mount(scheme, GuardedAdapter())

    def request(self, method, url, *args, **kwargs):
        if problem := outbound_url_error(url):
            raise OutboundRefused(f"{urlsplit(url).hostname or url[:40]} is not contacted: {problem}")
        kwargs["allow_redirects"] = False
        response = super().request(method, url, *args, **kwargs)
        if response.is_redirect:
            raise OutboundRefused(
                f"{urlsplit(url).hostname} answered with a redirect (HTTP 3xx), which is not followed: "
                "name the provider's final URL"
            )
        return response


class _PolicedApp(DjangoOAuth2App):
    client_cls = _PolicedSession


@functools.cache
def _client(discovery_url: str, client_id: str, client_secret: str, scopes: str, timeout_s: float):
    client: DjangoOAuth2App = OAuth().register(
        name="oidc",
        client_cls=_PolicedApp,
        client_id=client_id,
        client_secret=client_secret,
        server_metadata_url=discovery_url,
        client_kwargs={"scope": scopes, "code_challenge_method": "S256", "default_timeout": timeout_s},
    )
    return client


def _provider(oidc: sso.OidcSettings) -> DjangoOAuth2App:
    return _client(
        oidc.discovery_url,
        oidc.client_id,
        settings.MIRRORPLANE_OIDC_CLIENT_SECRET,
        oidc.scopes,
        oidc.timeout_s,
    )


class IssuerMismatch(Exception):
    """The discovery document names another issuer than MIRRORPLANE_OIDC_ISSUER."""


def _checked_issuer(client: DjangoOAuth2App, oidc: sso.OidcSettings) -> DjangoOAuth2App:
    """The client, once the provider's discovery document names the configured issuer, as OpenID Connect
    Discovery requires (the ID tokens' `iss` is checked against the document's)."""
    named = str(client.load_server_metadata().get("issuer") or "")
    if named.rstrip("/") != oidc.issuer:
        raise IssuerMismatch(
            f"The discovery document {oidc.discovery_url} names the issuer {named!r}; "
            f"MIRRORPLANE_OIDC_ISSUER is {oidc.issuer!r}."
        )
    return client


def _issuer_mismatch(request, exc: IssuerMismatch):
    _log.warning("single sign-on: %s", exc)
    return _error(
        request,
        status=502,
        title="The identity provider is not the one configured",
        message=str(exc),
        fix="An administrator sets MIRRORPLANE_OIDC_ISSUER to the provider's issuer exactly (or "
        "MIRRORPLANE_OIDC_DISCOVERY_URL to that issuer's discovery document) and restarts the web.",
    )


def _error(request, *, status: int, title: str, message: str, fix: str = ""):
    return render(
        request,
        "web/sso_error.html",
        {"title": title, "message": message, "fix": fix, "sso": sso.oidc_settings()},
        status=status,
    )


# The error codes of OAuth 2.0 (RFC 6749 4.1.2.1, 5.2) and OpenID Connect Core 3.1.2.6: a page names one of
# these; anything else the provider (or whoever forged the callback's query) wrote is not shown as ours.
_OAUTH_ERRORS = frozenset(
    {
        "invalid_request", "unauthorized_client", "access_denied", "unsupported_response_type",
        "invalid_scope", "server_error", "temporarily_unavailable", "invalid_client", "invalid_grant",
        "unsupported_grant_type", "interaction_required", "login_required", "account_selection_required",
        "consent_required", "invalid_request_uri", "invalid_request_object", "request_not_supported",
        "request_uri_not_supported", "registration_not_supported",
    }
)  # fmt: skip


def _answered(oidc: sso.OidcSettings, error: str, description: str | None) -> str:
    """What the page says the provider answered: a standard error code, never its free text (logged for the
    administrator, quoted)."""
    _log.warning(
        "single sign-on: %s answered %r: %r", oidc.issuer, str(error)[:100], str(description or "")[:500]
    )
    code = error if error in _OAUTH_ERRORS else "an error"
    return f"{oidc.provider_name} answered {code} (its log, or this console's, has the details)."


def _unavailable(exc: BaseException, timeout_s: float) -> str | None:
    """Why the provider counts as down (no answer, or a server error), in words that carry no request
    detail (URLs with codes, headers); None: it answered."""
    if isinstance(exc, requests.Timeout):
        return f"no answer within {timeout_s:g} s (MIRRORPLANE_OIDC_TIMEOUT_S)"
    if isinstance(exc, requests.ConnectionError):
        return "the connection failed (refused, or the name does not resolve)"
    if isinstance(exc, requests.HTTPError) and exc.response is not None and exc.response.status_code >= 500:
        return f"it answered HTTP {exc.response.status_code}"
    return None


def _guarded(oidc: sso.OidcSettings, request_provider: Callable[[], T]) -> T:
    """A request to the provider behind its breaker, shared by every web process (controlplane.core.
    call_bounds): while the provider does not answer, a sign-in gets its page at once instead of holding a
    web thread for MIRRORPLANE_OIDC_TIMEOUT_S, and one trial request per pause asks again."""
    return call_bounds.breaker_call(
        f"oidc:{oidc.issuer}", request_provider, unanswered=lambda exc: _unavailable(exc, oidc.timeout_s)
    )


def _provider_failed(request, oidc: sso.OidcSettings, exc: Exception):
    reason = (
        str(exc)
        if isinstance(exc, call_bounds.BreakerOpen | OutboundRefused)
        else _unavailable(exc, oidc.timeout_s)
        or f"its answer is not what OpenID Connect specifies ({type(exc).__name__})"
    )
    _log.warning("single sign-on: the identity provider %s failed: %s", oidc.issuer, reason)
    return _error(
        request,
        status=502,
        title="The identity provider did not answer",
        message=f"Signing in through {oidc.provider_name} ({oidc.issuer}) failed: {reason}.",
        fix="An administrator checks that the provider is up and reachable from this server, and "
        "MIRRORPLANE_OIDC_ISSUER (or MIRRORPLANE_OIDC_DISCOVERY_URL). Try again in a moment.",
    )


def _oidc_or_404(request) -> sso.OidcSettings:
    oidc = sso.oidc_settings()
    if oidc is None:
        raise Http404("single sign-on is off (MIRRORPLANE_OIDC_ENABLED)")
    return oidc


def sso_login(request):
    """Off to the provider, remembering where to come back to."""
    oidc = _oidc_or_404(request)
    target = request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    request.session[_NEXT] = target if safe else ""
    callback = request.build_absolute_uri(reverse("web:sso-callback"))
    try:
        return _guarded(
            oidc, lambda: _checked_issuer(_provider(oidc), oidc).authorize_redirect(request, callback)
        )
    except IssuerMismatch as exc:
        return _issuer_mismatch(request, exc)
    except (requests.RequestException, ValueError, RuntimeError, call_bounds.BreakerOpen) as exc:
        return _provider_failed(request, oidc, exc)


def _verified_claims(request, oidc: sso.OidcSettings) -> dict:
    """The ID token's claims (verified), with the groups from the userinfo endpoint when the token has none."""
    provider = _provider(oidc)
    token = provider.authorize_access_token(
        request
    )  # the state first: a stray answer asks the provider nothing
    _checked_issuer(provider, oidc)
    if not token.get("userinfo"):
        raise OAuthError("no_id_token", "the provider sent no ID token: MIRRORPLANE_OIDC_SCOPES needs openid")
    claims = dict(token["userinfo"])
    if oidc.groups_claim not in claims and provider.load_server_metadata().get("userinfo_endpoint"):
        userinfo = provider.userinfo(token=token)
        if userinfo.get("sub") == claims.get("sub"):
            claims.setdefault(oidc.groups_claim, userinfo.get(oidc.groups_claim))
    return claims


def sso_callback(request):
    """The provider's answer: sign the user in with their groups' role, or a page saying why not."""
    oidc = _oidc_or_404(request)
    if request.GET.get("error"):
        return _error(
            request,
            status=403,
            title=f"{oidc.provider_name} did not sign you in",
            message=_answered(oidc, request.GET["error"], request.GET.get("error_description")),
            fix="Sign in again; if it keeps failing, an administrator reads the provider's log.",
        )
    try:
        claims = _guarded(oidc, lambda: _verified_claims(request, oidc))
    except IssuerMismatch as exc:
        return _issuer_mismatch(request, exc)
    except MismatchingStateError:
        return _error(
            request,
            status=400,
            title="This sign-in expired",
            message="The provider's answer does not belong to a sign-in this browser started "
            "(it was used already, or the session ended meanwhile).",
            fix="Start again from the login page.",
        )
    except OAuthError as exc:
        credentials = exc.error in ("invalid_client", "unauthorized_client")
        _log.warning(
            "single sign-on: the identity provider %s refused the token request: %s", oidc.issuer, exc.error
        )
        return _error(
            request,
            status=502,
            title="The identity provider refused this console"
            if credentials
            else "The identity provider refused the sign-in",
            message=_answered(oidc, exc.error, exc.description),
            fix="An administrator checks MIRRORPLANE_OIDC_CLIENT_ID and MIRRORPLANE_OIDC_CLIENT_SECRET against "
            "the client registered at the provider."
            if credentials
            else "Start again from the login page; if it keeps failing, an administrator reads the "
            "provider's log.",
        )
    except JoseError as exc:
        _log.warning("single sign-on: the ID token of %s did not verify: %s", oidc.issuer, exc.error)
        return _error(
            request,
            status=502,
            title="The identity provider's token did not verify",
            message=f"The ID token from {oidc.provider_name} was refused ({exc.error}: {exc.description}).",
            fix="An administrator checks MIRRORPLANE_OIDC_ISSUER and MIRRORPLANE_OIDC_CLIENT_ID, and the "
            "server's clock.",
        )
    except (requests.RequestException, ValueError, RuntimeError, call_bounds.BreakerOpen) as exc:
        return _provider_failed(request, oidc, exc)
    try:
        user = sso.sso_sign_in(issuer=str(claims.get("iss") or oidc.issuer), claims=claims, oidc=oidc)
    except sso.SignInRefused as exc:
        reason = str(exc)
        return _error(
            request,
            status=403,
            title="You may not sign in here",
            message=f"{reason[:1].upper()}{reason[1:]}.",
        )
    target = request.session.pop(_NEXT, "")
    auth_login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect(target or "web:overview")
