"""A user's role read in the statement that reads the user (`role_rank`, as the API token's statement reads
it) is the role `role_of` reads from their groups on its own: the highest role group, none without one."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth.models import Group, User
from django.db.models import OuterRef

from controlplane.core.roles import ROLE_GROUP_NAMES, ROLE_RANK, Role, role_of, role_rank

GROUPS = (*ROLE_GROUP_NAMES, "auditors")  # and a group that is no role


@pytest.mark.django_db
def test_the_role_read_with_the_user_is_the_one_read_from_their_groups():
    groups = [Group.objects.get_or_create(name=name)[0] for name in GROUPS]
    expected = {}
    for size in range(len(groups) + 1):
        for held in itertools.combinations(groups, size):
            user = User.objects.create_user(username="+".join(g.name for g in held) or "nobody")
            user.groups.set(held)
            expected[user.pk] = role_of(user)
    read = User.objects.annotate(**{ROLE_RANK: role_rank(OuterRef("pk"))})
    assert {user.pk: role_of(user) for user in read} == expected
    assert expected[User.objects.get(username="viewer+admin").pk] is Role.ADMIN
    assert expected[User.objects.get(username="auditors").pk] is None
