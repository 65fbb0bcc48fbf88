"""The list helper (controlplane.web.listing): the same query string searches, filters, sorts and pages a
queryset in the database and rows in memory; bad values are named with their fix and ignored."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import RequestFactory

from controlplane.flows import services
from controlplane.flows.models import Cluster, SecurityProtocol
from controlplane.web.listing import Filter, ListSpec, Sort, list_page
from controlplane.web.templatetags.web import filter_options

pytestmark = pytest.mark.django_db

SPEC = ListSpec(
    sorts=(Sort("alias"), Sort("updated", field="updated_at")),
    default_sort="alias",
    search_fields=("alias", "bootstrap_servers"),
    filters=(Filter("security", "Security", SecurityProtocol.choices, field="security_protocol"),),
    page_size=2,
)


def _get(query: dict):
    return RequestFactory().get("/clusters/", query)


@pytest.fixture
def clusters():
    for alias in ("c", "a", "b", "lab"):
        services.cluster_create(actor=None, alias=alias, bootstrap_servers=f"{alias}-host:9092")
    Cluster.objects.filter(alias="lab").update(security_protocol=SecurityProtocol.SSL)
    return Cluster.objects.all()


def test_a_queryset_is_searched_filtered_sorted_and_paged_in_the_database(clusters):
    listing = list_page(_get({"q": "HOST", "sort": "-alias", "page": "2"}), SPEC, clusters)
    assert [c.alias for c in listing.rows] == ["b", "a"]
    assert (listing.total, listing.matched, listing.errors) == (4, 4, [])
    assert listing.sort_direction("alias") == "descending"
    assert listing.sort_url("alias") == "?q=HOST&sort=alias"  # a new sort starts at page 1
    assert listing.url(page=1) == "?q=HOST&sort=-alias&page=1"
    only_ssl = list_page(_get({"security": "SSL"}), SPEC, clusters)
    assert ([c.alias for c in only_ssl.rows], only_ssl.narrowed) == (["lab"], True)
    assert only_ssl.clear_url == "?"


def test_bad_values_are_named_with_their_fix_and_ignored(clusters):
    listing = list_page(_get({"sort": "size", "security": "TLS", "keep": "1"}), SPEC, clusters)
    assert listing.errors == [
        "security: no security 'TLS'; choose one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, or any",
        "sort: no column 'size'; sort by one of alias, updated (prefix - for descending)",
    ]
    assert [c.alias for c in listing.rows] == ["a", "b"]  # the default sort, first page, no filter
    assert listing.params == {"keep": "1"}  # a page's own parameters stay in its links


def test_rows_in_memory_sort_unknown_values_last_either_way():
    rows = [SimpleNamespace(name=n, lag=lag) for n, lag in (("x", 5), ("y", None), ("z", 1))]
    spec = ListSpec(sorts=(Sort("lag"),), search_text=lambda r: r.name, filters=(), page_size=10)
    assert [r.name for r in list_page(_get({"sort": "lag"}), spec, rows).rows] == ["z", "x", "y"]
    assert [r.name for r in list_page(_get({"sort": "-lag"}), spec, rows).rows] == ["x", "z", "y"]
    assert [r.name for r in list_page(_get({"q": "Y"}), spec, rows).rows] == ["y"]


def test_a_filters_options_name_every_choice_escaped_with_the_chosen_one_selected():
    assert filter_options([('a"<', "x & y"), ("b", "B")], "b") == (
        '<option value="a&quot;&lt;">x &amp; y</option><option value="b" selected>B</option>'
    )


def test_a_list_page_shows_its_filters_options_with_the_chosen_one_selected(clusters, client_as):
    page = client_as("viewer").get("/clusters/", {"security": "SSL"}).content.decode()
    assert '<option value="SSL" selected>Ssl</option>' in page
    assert '<option value="PLAINTEXT">Plaintext</option>' in page
    assert page.count(" selected>") == 1
