"""Users and their role (a Django group: controlplane.core.roles)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from controlplane.core.audit import audit_record
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import ApiToken, AuditAction
from controlplane.core.roles import Role
from controlplane.core.tokens import api_token_issue


# -- users and roles --------------------------------------------------------------------------------------
def user_set_role(*, user, role: Role | None) -> None:
    """Make `role` the user's only role group (groups are created on first use); None takes every role away.
    The Django admin site follows it: admins are staff, anyone demoted below admin loses staff (and
    superuser) status."""
    groups = [Group.objects.get_or_create(name=r.group_name)[0] for r in Role]
    user.groups.remove(*groups)
    if role is not None:
        user.groups.add(Group.objects.get(name=role.group_name))
    user.is_staff = role is Role.ADMIN
    if role is not Role.ADMIN:
        user.is_superuser = False
    user.save(update_fields=["is_staff", "is_superuser"])


@transaction.atomic
def user_set_active(*, actor, user, active: bool) -> None:
    """Disable a user (or enable them again), audited. Disabled, they are signed out at their next request
    (Django's backends refuse an inactive user's session), their API token is deleted, and neither a
    password nor the identity provider signs them in again until an admin enables them."""
    if not active and user.pk == getattr(actor, "pk", None):
        raise ServiceValidationError({"is_active": ["you cannot disable yourself: another admin does it"]})
    before = user.is_active
    user.is_active = active
    user.save(update_fields=["is_active"])
    if not active:
        ApiToken.objects.filter(user=user).delete()
    audit_record(
        actor=actor,
        action=AuditAction.UPDATE,
        object_type="user",
        object_id=user.pk,
        object_repr=user.get_username(),
        before={"active": before},
        after={"active": active},
        detail="disabled: sessions and API token ended" if not active else "enabled again",
    )


@transaction.atomic
def user_create_with_role(*, username: str, role: Role, password: str | None = None) -> tuple[Any, str]:
    """A user with `role` and a new API token, whose key is returned (the only time it is seen: tokens are
    stored hashed). An existing user gets the role, and a new token replaces theirs."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    if password:
        user.set_password(password)
    elif not user.has_usable_password():
        user.set_unusable_password()
    user.save()
    user_set_role(user=user, role=role)
    key, _ = api_token_issue(user=user)
    return user, key
