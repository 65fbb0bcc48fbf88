"""Single sign-on through an OpenID Connect provider: which role a provider's groups give, and who the
provider's user is here (docs/sso.md).

The role follows the groups at every sign-in: the highest role any of the user's groups maps to in
MIRRORPLANE_OIDC_ROLE_MAP, else its `*` default; with neither the sign-in is refused and the user loses any
role they had (an API token of theirs then authorizes nothing). Every sign-in, refused or not, is audited.

A provider's user is linked to a user here by the provider's (issuer, subject), never by name: a provider
that lets people choose their `preferred_username` cannot take over a local account of that name.
"""

from __future__ import annotations

import functools
import logging
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from controlplane.core.audit import audit_record
from controlplane.core.models import AuditAction, AuditOutcome, SsoIdentity
from controlplane.core.roles import Role, role_of
from controlplane.core.users import user_set_role

_log = logging.getLogger(__name__)

DEFAULT_GROUP = "*"


# -- the role map (pure) ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RoleMap:
    """Provider group -> role, and the role of a user in no mapped group (`*`), if any."""

    roles: Mapping[str, Role]
    default: Role | None = None


def role_map_parse(entries: Iterable[str]) -> RoleMap:
    """`group=role` entries (`*=role`: everyone else the provider signs in). ValueError names the entry."""
    roles: dict[str, Role] = {}
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        group, sep, role_name = (part.strip() for part in entry.rpartition("="))
        if not sep or not group:
            raise ValueError(
                f"MIRRORPLANE_OIDC_ROLE_MAP entry {entry!r} is not group=role "
                "(e.g. kafka-admins=admin,kafka-oncall=operator,*=viewer)"
            )
        try:
            role = Role.from_name(role_name)
        except ValueError as exc:
            raise ValueError(f"MIRRORPLANE_OIDC_ROLE_MAP entry {entry!r}: {exc}") from None
        if group in roles and roles[group] is not role:
            raise ValueError(f"MIRRORPLANE_OIDC_ROLE_MAP maps the group {group!r} twice")
        roles[group] = role
    default = roles.pop(DEFAULT_GROUP, None)
    return RoleMap(roles=roles, default=default)


def role_for_groups(*, groups: Iterable[str], role_map: RoleMap) -> Role | None:
    """The highest role the groups or the default give; None: no role here."""
    mapped = [role_map.roles[group] for group in groups if group in role_map.roles]
    if role_map.default is not None:
        mapped.append(role_map.default)
    return max(mapped, default=None)


def claim_groups(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups of an ID token or userinfo claim: a list of names (a lone name counts as one group)."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [str(group) for group in value]
    return []


# -- settings ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OidcSettings:
    """The OpenID Connect client's settings (controlplane/settings.py), checked."""

    issuer: str
    discovery_url: str
    client_id: str
    scopes: str
    groups_claim: str
    username_claim: str
    role_map: RoleMap
    provider_name: str
    timeout_s: float


@functools.cache
def _oidc_settings(
    *,
    enabled: bool,
    issuer: str,
    discovery_url: str,
    client_id: str,
    has_secret: bool,
    role_map: tuple[str, ...],
    scopes: str,
    groups_claim: str,
    username_claim: str,
    provider_name: str,
    timeout_s: float,
) -> OidcSettings | None:
    if not enabled:
        return None
    missing = [
        name
        for name, value in (
            ("MIRRORPLANE_OIDC_ISSUER", issuer),
            ("MIRRORPLANE_OIDC_CLIENT_ID", client_id),
            ("MIRRORPLANE_OIDC_CLIENT_SECRET", has_secret),
        )
        if not value
    ]
    if missing:
        raise ImproperlyConfigured(
            f"MIRRORPLANE_OIDC_ENABLED is true but {', '.join(missing)} not set: set them (docs/sso.md) "
            "or turn MIRRORPLANE_OIDC_ENABLED off"
        )
    try:
        parsed = role_map_parse(role_map)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    if not parsed.roles and parsed.default is None:
        _log.warning("MIRRORPLANE_OIDC_ROLE_MAP is empty: every single sign-on is refused (docs/sso.md)")
    issuer = issuer.rstrip("/")
    return OidcSettings(
        issuer=issuer,
        discovery_url=discovery_url or f"{issuer}/.well-known/openid-configuration",
        client_id=client_id,
        scopes=scopes,
        groups_claim=groups_claim,
        username_claim=username_claim,
        role_map=parsed,
        provider_name=provider_name,
        timeout_s=timeout_s,
    )


def oidc_settings() -> OidcSettings | None:
    """The single sign-on settings, or None when it is off. ImproperlyConfigured (at start-up: the app's
    ready() calls it) names what is missing or wrong. The client secret is not in it: only the client that
    sends it reads the setting."""
    return _oidc_settings(
        enabled=settings.MIRRORPLANE_OIDC_ENABLED,
        issuer=settings.MIRRORPLANE_OIDC_ISSUER,
        discovery_url=settings.MIRRORPLANE_OIDC_DISCOVERY_URL,
        client_id=settings.MIRRORPLANE_OIDC_CLIENT_ID,
        has_secret=bool(settings.MIRRORPLANE_OIDC_CLIENT_SECRET),
        role_map=tuple(settings.MIRRORPLANE_OIDC_ROLE_MAP),
        scopes=settings.MIRRORPLANE_OIDC_SCOPES,
        groups_claim=settings.MIRRORPLANE_OIDC_GROUPS_CLAIM,
        username_claim=settings.MIRRORPLANE_OIDC_USERNAME_CLAIM,
        provider_name=settings.MIRRORPLANE_OIDC_PROVIDER_NAME,
        timeout_s=settings.MIRRORPLANE_OIDC_TIMEOUT_S,
    )


def password_login_allowed() -> bool:
    """Local usernames and passwords sign in unless single sign-on is on and they are turned off."""
    return settings.MIRRORPLANE_OIDC_PASSWORD_LOGIN or oidc_settings() is None


# -- signing in -------------------------------------------------------------------------------------------
class SignInRefused(Exception):
    """The provider vouched for the user, but they may not sign in here (the message says why)."""


def _refuse(*, user, name: str, issuer: str, message: str) -> SignInRefused:
    audit_record(
        actor=user,
        actor_name=name,
        action=AuditAction.SIGN_IN,
        object_type="user",
        object_id=getattr(user, "pk", "") or "",
        object_repr=name,
        outcome=AuditOutcome.REFUSED,
        detail=f"single sign-on through {issuer}: {message}",
    )
    _log.warning("single sign-on of %s through %s refused: %s", name, issuer, message)
    return SignInRefused(message)


def _claimed_name(claims: Mapping[str, Any], claim: str) -> str:
    for value in (claims.get(claim), claims.get("email"), claims.get("sub")):
        if isinstance(value, str) and value.strip():
            return value.strip()[:150]
    return ""


# Characters no name shows: controls, the bidirectional overrides (U+202E turns "gnp.exe" around in an
# audit log), zero-width and other format characters, unassigned and private-use code points.
_UNSHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _name_problem(name: str) -> str:
    """Why a name the provider sent may not be a username here ("" when it may)."""
    for character in name:
        if unicodedata.category(character) in _UNSHOWN_CATEGORIES:
            return (
                f"the provider's username holds the invisible or control character U+{ord(character):04X}: "
                "ask the provider's administrator to rename the account"
            )
    return ""


def sso_sign_in(*, issuer: str, claims: Mapping[str, Any], oidc: OidcSettings):
    """The user here for the provider's verified claims, with the role their groups give now (created on
    the first sign-in). SignInRefused (audited) when no group maps to a role, the user is disabled here, or
    the name is already another account's."""
    subject = str(claims.get("sub") or "")
    name = _claimed_name(claims, oidc.username_claim)
    groups = claim_groups(claims, oidc.groups_claim)
    identity = SsoIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    user = identity.user if identity else None
    if not subject or not name:
        raise _refuse(user=user, name=name or "?", issuer=issuer, message="the ID token names no user (sub)")
    if problem := _name_problem(name):
        shown = name.encode("ascii", "backslashreplace").decode()  # the audit log shows what it holds
        raise _refuse(user=user, name=shown, issuer=issuer, message=problem)
    role = role_for_groups(groups=groups, role_map=oidc.role_map)
    if role is None:
        held = role_of(user) if user is not None else None
        if user is not None:
            user_set_role(user=user, role=None)
        shown = ", ".join(groups) if groups else f"none (the {oidc.groups_claim!r} claim is empty or absent)"
        raise _refuse(
            user=user,
            name=user.username if user else name,
            issuer=issuer,
            message=f"no role for the groups {shown}"
            + (f" (the {held.group_name} role they had is taken away)" if held else "")
            + ": ask an administrator to add you to a group MIRRORPLANE_OIDC_ROLE_MAP maps to a role",
        )
    if user is None:
        if get_user_model().objects.filter(username=name).exists():
            raise _refuse(
                user=None,
                name=name,
                issuer=issuer,
                message=f"an account here is already named {name!r} (a local account, or another "
                "identity's): an administrator renames or deletes it before this identity can sign in",
            )
        with transaction.atomic():
            user = get_user_model().objects.create(username=name, email=str(claims.get("email") or ""))
            user.set_unusable_password()
            user.save(update_fields=["password"])
            SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    elif not user.is_active:
        raise _refuse(user=user, name=user.username, issuer=issuer, message="this account is disabled here")
    before = role_of(user)
    user_set_role(user=user, role=role)
    audit_record(
        actor=user,
        action=AuditAction.SIGN_IN,
        object_type="user",
        object_id=user.pk,
        object_repr=user.username,
        before={"role": before.group_name if before else None},
        after={"role": role.group_name, "groups": groups},
        detail=f"single sign-on through {issuer}: the {role.group_name} role from the groups {', '.join(groups) or '(default)'}",
    )
    _log.info("single sign-on of %s through %s: the %s role", user.username, issuer, role.group_name)
    return user
