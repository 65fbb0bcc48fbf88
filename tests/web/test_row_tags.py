"""The tags in every row of the flows table and of a flow's partitions. `{% row_url %}`, the rows' links:
Django's `{% url %}` for the same name and arguments under the request's script prefix, reversed once per
process for each (the flows page reversed two per row, 100 per request). `{% observed %}`: when the row's
figures were observed, with their age when stale (an included template before)."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

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


OBSERVED = engines["django"].from_string("{% load web %}<td>{% observed live %}</td>")
AT = datetime.datetime(2026, 11, 29, 6, 30, 5, tzinfo=datetime.UTC)
TIME = '<time datetime="2026-11-29T06:30:05+00:00">2026-11-29 06:30:05 UTC</time>'


def test_observed_says_when_and_how_long_ago_when_stale_and_no_report_before_the_first():
    def shown(**live) -> str:
        return OBSERVED.render({"live": SimpleNamespace(**live)})

    assert shown(observed_at=AT, stale=False, age_s=3.0) == f"<td>{TIME}</td>"
    assert shown(observed_at=AT, stale=True, age_s=600.0) == (
        f'<td>{TIME} <span class="badge stale">last seen 10 min 0 s ago</span></td>'
    )
    assert shown(observed_at=None, stale=True, age_s=None) == (
        '<td><span class="badge waiting">no report yet</span></td>'
    )
