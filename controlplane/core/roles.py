"""Roles: viewer (read), operator (pause, resume, failover), admin (everything, clusters and secrets).

A user's role is the Django group of that name (the highest if several); superusers are admins.
"""

from __future__ import annotations

from enum import IntEnum


class Role(IntEnum):
    """Ordered: a role may do everything the roles below it may."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def group_name(self) -> str:
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> Role:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown role {name!r}; roles: viewer, operator, admin") from None


ROLE_GROUP_NAMES = tuple(role.group_name for role in Role)


def role_of(user) -> Role | None:
    """The user's role, or None (an authenticated user without a role may do nothing)."""
    if not user or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    names = user.groups.filter(name__in=ROLE_GROUP_NAMES).values_list("name", flat=True)
    return max((Role.from_name(name) for name in names), default=None)
