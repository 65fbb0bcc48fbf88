"""`{% row_url %}`, the flows table's links: Django's `{% url %}` for the same name and arguments under the
request's script prefix, reversed once per process for each (the flows page reversed two per row, 100 per
request)."""

from __future__ import annotations

from django.template import engines
from django.urls import set_script_prefix

from controlplane.web.templatetags.web import _reversed

BOTH = engines["django"].from_string(
    '{% load web %}{% for pk in pks %}{% row_url "web:flow-pause" pk %} {% url "web:flow-pause" pk %}\n'
    "{% endfor %}"
)


def test_row_url_is_the_url_tag_reversed_once_per_name_arguments_and_script_prefix():
    _reversed.cache_clear()
    shown = set()
    try:
        for prefix in ("/", "/mirrorplane/", "/"):
            set_script_prefix(prefix)
            for _ in range(3):
                for line in BOTH.render({"pks": [1, 2]}).splitlines():
                    remembered, reversed_now = line.split(" ")
                    assert remembered == reversed_now
                    shown.add(remembered)
    finally:
        set_script_prefix("/")
    assert shown == {
        "/flows/1/pause/",
        "/flows/2/pause/",
        "/mirrorplane/flows/1/pause/",
        "/mirrorplane/flows/2/pause/",
    }
    assert _reversed.cache_info().misses == 4  # of 18 asked: each flow under each prefix once
