"""Users and their role (a Django group: controlplane.core.roles)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from rest_framework.authtoken.models import Token

from controlplane.core.roles import Role


# -- users and roles --------------------------------------------------------------------------------------
def user_set_role(*, user, role: Role) -> None:
    """Make `role` the user's only role group (groups are created on first use)."""
    groups = [Group.objects.get_or_create(name=r.group_name)[0] for r in Role]
    user.groups.remove(*groups)
    user.groups.add(Group.objects.get(name=role.group_name))


@transaction.atomic
def user_create_with_role(*, username: str, role: Role, password: str | None = None) -> tuple[Any, str]:
    """A user with `role` and an API token (returned). Existing users get the role and keep their token."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    if password:
        user.set_password(password)
    elif not user.has_usable_password():
        user.set_unusable_password()
    if role is Role.ADMIN:
        user.is_staff = True  # the Django admin site
    user.save()
    user_set_role(user=user, role=role)
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key
