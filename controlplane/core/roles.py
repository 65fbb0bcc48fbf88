"""Roles: viewer (read), operator (pause, resume, failover), admin (everything, clusters and secrets).

A user's role is the Django group of that name (the highest if several); superusers are admins.
"""

from __future__ import annotations

from enum import IntEnum

from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import IntegerField
from django.db.models.expressions import RawSQL


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


def _role_rank_sql(user_id: str) -> tuple[str, list]:
    """SQL and parameters of the rank (Role's value; NULL without a role) of the user whose id is `user_id`
    (an outer statement's column, quoted, or a placeholder). Written in SQL: the ORM's CASE over the role
    names compiled for longer than a statement of its own took (a token's user and role 1.45 ms against
    1.1), and its own groups read compiled for longer than it ran."""
    groups = Group._meta.db_table
    memberships = Group.user_set.through._meta.db_table
    ranks = " ".join("WHEN %s THEN %s" for _ in Role)
    return (
        f'SELECT MAX(CASE g."name" {ranks} END) FROM "{groups}" g INNER JOIN "{memberships}" m '
        f'ON m."group_id" = g."id" WHERE m."user_id" = {user_id}',
        [value for role in Role for value in (role.group_name, int(role))],
    )


def role_rank(user_id_column: str) -> RawSQL:
    """The role of the user whose id is in `user_id_column` (the outer statement's column, quoted, e.g.
    `"controlplane_apitoken"."user_id"`) as its rank: role_of's answer read in the statement that reads the
    user, as `ROLE_RANK`, instead of a statement of its own."""
    return RawSQL(*_role_rank_sql(user_id_column), output_field=IntegerField())


def role_of(user) -> Role | None:
    """The user's role, or None (an authenticated user without a role may do nothing): the highest of their
    role groups, from the `ROLE_RANK` they were read with (`role_rank`) if they were."""
    if not user or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    if hasattr(user, ROLE_RANK):
        rank = getattr(user, ROLE_RANK)
    else:
        sql, params = _role_rank_sql("%s")
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, user.pk])
            (rank,) = cursor.fetchone()
    return None if rank is None else Role(rank)
