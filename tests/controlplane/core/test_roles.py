"""A user's role, read on its own (`role_of`) or in the statement that reads the user (`role_rank`, as the API
token's statement reads it): the highest of their role groups, none without one."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth.models import Group, User

from controlplane.core.roles import ROLE_GROUP_NAMES, ROLE_RANK, Role, role_of, role_rank

GROUPS = (*ROLE_GROUP_NAMES, "auditors")  # and a group that is no role


@pytest.mark.django_db
def test_a_role_is_the_highest_role_group_read_alone_or_with_the_user():
    groups = [Group.objects.get_or_create(name=name)[0] for name in GROUPS]
    expected = {}
    for size in range(len(groups) + 1):
        for held in itertools.combinations(groups, size):
            user = User.objects.create_user(username="+".join(g.name for g in held) or "nobody")
            user.groups.set(held)
            expected[user.pk] = max(
                (Role.from_name(group.name) for group in held if group.name in ROLE_GROUP_NAMES), default=None
            )
    assert {user.pk: role_of(user) for user in User.objects.all()} == expected
    read = User.objects.annotate(**{ROLE_RANK: role_rank(f'"{User._meta.db_table}"."id"')})
    assert {user.pk: role_of(user) for user in read} == expected
    assert expected[User.objects.get(username="viewer+admin").pk] is Role.ADMIN
    assert expected[User.objects.get(username="auditors").pk] is None
