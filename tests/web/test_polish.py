"""Small things that cost trust: the "not allowed" page, the favicon, the demo banner, the audit diff,
MM2 import placeholders."""

from __future__ import annotations

import re
import shlex

import pytest
from django.core.management import call_command
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_not_allowed_page_keeps_the_navigation_and_names_a_real_command(client_as, users):
    viewer = client_as("viewer")
    response = viewer.get(reverse("web:flow-create"))

    assert response.status_code == 403
    page = response.content.decode()
    assert 'aria-label="Main"' in page and reverse("web:flows") in page and "Log out" in page
    command = re.search(r"<code>python manage.py (.+?)</code>", page).group(1)
    assert command == "create_admin viewer --role admin"
    # The command exists and does what the page says: afterwards the same page opens.
    name, *args = shlex.split(command)
    call_command(name, *args)
    assert viewer.get(reverse("web:flow-create")).status_code == 200


def test_not_allowed_page_for_a_user_without_a_role_still_has_the_navigation(client_as):
    page = client_as("norole").get(reverse("web:flows")).content.decode()
    assert 'aria-label="Main"' in page and "no role" in page and "Log out" in page
