"""`{% url %}` with its answers remembered (controlplane/web/templatetags/cached_urls.py) writes what
Django's own tag writes, for every form of the tag, and follows the script prefix and the current app."""

from __future__ import annotations

import pytest
from django.template import Context, Engine, engines
from django.template.defaulttags import URLNode
from django.test import RequestFactory
from django.urls import NoReverseMatch, resolve, set_script_prefix
from django.utils.safestring import SafeString

from controlplane.web.templatetags.cached_urls import CachedURLNode, reversed_url

CASES = [
    "{% url 'web:flows' %}",
    "{% url 'web:flow' 7 %}",
    "{% url 'web:flow' pk %}",
    "{% url 'web:flow' text_pk %}",
    "{% url 'web:mismatch-event' 7 9 %}",
    "{% url name pk %}",
    "{% url 'web:flow' pk=pk %}",
    "{% url 'web:topic' 'dc1' 'orders & co' %}",
    "{% url 'web:topic' 'dc1' topic %}",
    "{% url 'web:flow' pk as link %}[{{ link }}]",
    "{% url 'web:nothing-of-that-name' as link %}[{{ link }}]",
    "{% url 'admin:index' %}",
    "{% url 'web:flow' safe %}",
    "{% url 'web:flow' flow %}",
]


class Flow:
    """An argument that is neither text nor a number (reversed each time, as Django does)."""

    def __str__(self) -> str:
        return "7"


CONTEXT = {
    "pk": 7,
    "text_pk": "7",
    "name": "web:flow",
    "topic": "a/b?c",
    "safe": SafeString("7"),
    "flow": Flow(),
}


def django_engine() -> Engine:
    """The project's engine without the builtin: Django's own `{% url %}`."""
    ours = engines["django"].engine
    return Engine(dirs=ours.dirs, app_dirs=ours.app_dirs, context_processors=ours.context_processors)


@pytest.mark.parametrize("source", CASES)
def test_the_tag_writes_what_djangos_writes(source):
    ours, theirs = engines["django"].engine, django_engine()
    assert isinstance(ours.from_string(source).nodelist[0], CachedURLNode)
    assert type(theirs.from_string(source).nodelist[0]) is URLNode
    for _ in range(2):  # the second answer is the remembered one
        assert ours.from_string(source).render(Context(CONTEXT)) == theirs.from_string(source).render(
            Context(CONTEXT)
        )


def test_an_unknown_name_raises_as_djangos_does():
    with pytest.raises(NoReverseMatch):
        engines["django"].engine.from_string("{% url 'web:nothing-of-that-name' %}").render(Context())


def test_the_answer_follows_the_script_prefix():
    template = engines["django"].engine.from_string("{% url 'web:flow' 7 %}")
    assert template.render(Context()) == "/flows/7/"
    set_script_prefix("/mirrorplane/")
    try:
        assert template.render(Context()) == "/mirrorplane/flows/7/"
    finally:
        set_script_prefix("/")
    assert template.render(Context()) == "/flows/7/"


def test_the_answer_follows_the_current_app():
    """The admin's URLs under the request's namespace, as Django's tag reverses them."""
    request = RequestFactory().get("/admin/")
    request.resolver_match = resolve("/admin/")
    source = "{% url 'admin:index' %}"
    ours = engines["django"].engine.from_string(source).render(Context({"request": request}))
    theirs = django_engine().from_string(source).render(Context({"request": request}))
    assert ours == theirs


def test_a_pages_urls_are_remembered_literal_names_and_all():
    """A template's literal ('web:flows') is a SafeString, its numbers ints: both remembered."""
    template = engines["django"].engine.from_string("{% url 'web:flow' 8 %} {% url 'web:flows' %}")
    template.render(Context())
    before = reversed_url.cache_info()
    assert template.render(Context()) == "/flows/8/ /flows/"
    after = reversed_url.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (2, 0)
