"""API tokens: stored hashed, shown once, rotated, expiring.

A token is 43 random URL-safe characters (256 bits), so its SHA-256 digest is what the database keeps:
a copy of the database hands out no token. `api_token_issue` makes a user's token (replacing the one
they had: rotation) and returns its key, the only time it is seen; it expires after
MIRRORPLANE_API_TOKEN_TTL_DAYS (0: never). `ApiTokenAuthentication` reads `Authorization: Token <key>`.
"""

from __future__ import annotations

import datetime
import hashlib
import secrets

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from controlplane.core.audit import audit_record
from controlplane.core.models import ApiToken, AuditAction, SsoIdentity
from controlplane.core.roles import ROLE_RANK, role_rank
from controlplane.core.statements import first_row, statement


def token_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@transaction.atomic
def api_token_issue(*, user, expires_in_days: int | None = None) -> tuple[str, ApiToken]:
    """A new token for `user`, replacing theirs; (its key, shown only now, and the stored row). A user
    who signs in through the identity provider gets one that lasts MIRRORPLANE_OIDC_API_TOKEN_TTL_HOURS at
    most: the provider, not this console, knows whether they still work here, and asks again at sign-in."""
    days = settings.MIRRORPLANE_API_TOKEN_TTL_DAYS if expires_in_days is None else expires_in_days
    key = secrets.token_urlsafe(32)
    now = timezone.now()
    expires_at = _capped(
        sso=SsoIdentity.objects.filter(user=user).exists(),
        issued_at=now,
        expires_at=now + datetime.timedelta(days=days) if days > 0 else None,
    )
    ApiToken.objects.filter(user=user).delete()
    token = ApiToken.objects.create(
        user=user, digest=token_digest(key), prefix=key[:8], expires_at=expires_at
    )
    return key, token


@transaction.atomic
def api_token_rotate(*, user, actor, expires_in_days: int | None = None) -> tuple[str, ApiToken]:
    """api_token_issue, audited: who rotated whose token, its prefix and expiry, never the key."""
    key, token = api_token_issue(user=user, expires_in_days=expires_in_days)
    audit_record(
        actor=actor,
        action=AuditAction.ROTATE_API_TOKEN,
        object_type="user",
        object_id=user.pk,
        object_repr=user.get_username(),
        after={
            "prefix": token.prefix,
            "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        },
    )
    return key, token


def _capped(
    *, sso: bool, issued_at: datetime.datetime, expires_at: datetime.datetime | None
) -> datetime.datetime | None:
    """When a token issued at `issued_at` stops working: its own expiry, and for a user who signs in
    through the identity provider (`sso`) MIRRORPLANE_OIDC_API_TOKEN_TTL_HOURS after issue at the latest
    (a token issued before that rule included)."""
    if not sso:
        return expires_at
    short = issued_at + datetime.timedelta(hours=settings.MIRRORPLANE_OIDC_API_TOKEN_TTL_HOURS)
    return short if expires_at is None else min(expires_at, short)


@statement
def _token_with_user(digest: str):
    """The token of `digest` with its user, whether they sign in through the identity provider, and their
    role: one statement per request."""
    return first_row(
        ApiToken.objects.select_related("user")
        .annotate(
            sso=Exists(SsoIdentity.objects.filter(user=OuterRef("user_id"))),
            user_role_rank=role_rank(f'"{ApiToken._meta.db_table}"."user_id"'),
        )
        .filter(digest=digest)
    )


class ApiTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>` against the stored digests; an expired token is a 401 saying how to
    get a new one."""

    def authenticate_credentials(self, key):
        found = _token_with_user(digest=token_digest(key))
        if not found:
            raise exceptions.AuthenticationFailed("invalid token")
        token = found[0]
        setattr(token.user, ROLE_RANK, token.user_role_rank)
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("user inactive or deleted")
        expires_at = _capped(sso=token.sso, issued_at=token.created_at, expires_at=token.expires_at)
        if expires_at is not None and expires_at <= timezone.now():
            raise exceptions.AuthenticationFailed(
                f"token {token.prefix}… expired at {expires_at.isoformat()}: rotate it "
                "(manage.py rotate_api_token USER, or POST /api/v1/tokens/rotate/ before it expires)"
            )
        return token.user, token
