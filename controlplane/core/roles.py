"""Roles: viewer (read), operator (pause, resume, failover), admin (everything, clusters and secrets).

A user's role is the Django group of that name (the highest if several); superusers are admins.
"""

from __future__ import annotations

from enum import IntEnum

from django.contrib.auth.models import Group
from django.db.models import Case, IntegerField, OuterRef, Subquery, Value, When


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


# The attribute a user read with `role_rank` carries its role in (role_of reads it instead of asking again).
ROLE_RANK = "role_rank"


def role_rank(user_id: OuterRef) -> Subquery:
    """The role of the user `user_id` refers to, as its rank (Role's value; NULL without a role): role_of's
    answer read in the statement that reads the user, as `ROLE_RANK`, instead of a statement of its own."""
    rank = Case(
        *(When(name=role.group_name, then=Value(int(role))) for role in Role), output_field=IntegerField()
    )
    groups = Group.objects.filter(user=user_id, name__in=ROLE_GROUP_NAMES).annotate(rank=rank)
    return Subquery(groups.order_by("-rank").values("rank")[:1])


def role_of(user) -> Role | None:
    """The user's role, or None (an authenticated user without a role may do nothing); from the `ROLE_RANK`
    it was read with (`role_rank`), if it was."""
    if not user or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    if hasattr(user, ROLE_RANK):
        rank = getattr(user, ROLE_RANK)
        return None if rank is None else Role(rank)
    names = user.groups.filter(name__in=ROLE_GROUP_NAMES).values_list("name", flat=True)
    return max((Role.from_name(name) for name in names), default=None)
