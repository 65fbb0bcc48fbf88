"""`{% url %}` with its answers remembered (a template builtin: settings.TEMPLATES "builtins").

Django's `reverse` costs 15-60 µs a call (machines differ), and a page asks it a dozen times for its
navigation alone, a flow's page about 30 times. What a URL depends on does not change while the
process runs: the view name, its arguments, the URLconf, the script prefix and the current application.
So the answer for a name with text or integer arguments is remembered per those (`reversed_url`); other
arguments (a model, a lazy text) are reversed each time, as Django does. (URLs under `i18n_patterns` would depend on
the active language too: the URLconf has none.) The tag's syntax and output are
Django's own (`as var`, escaping, NoReverseMatch): tests/controlplane/web/test_cached_urls.py compares them.
"""

from __future__ import annotations

import functools

from django import template
from django.template import defaulttags
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils.html import conditional_escape

register = template.Library()

_REMEMBERED = (int, str)


@functools.lru_cache(maxsize=10_000)
def reversed_url(
    script_prefix: str, urlconf: str | None, name: str, args: tuple, kwargs: tuple = (), current_app=None
) -> str:
    """`reverse(name, args, kwargs)` under `script_prefix` (reverse reads it itself) and `urlconf`, kept."""
    return reverse(name, args=args, kwargs=dict(kwargs), urlconf=urlconf, current_app=current_app)


class CachedURLNode(defaulttags.URLNode):
    def render(self, context):
        args = tuple(arg.resolve(context) for arg in self.args)
        kwargs = tuple(sorted((key, value.resolve(context)) for key, value in self.kwargs.items()))
        view_name = self.view_name.resolve(context)
        values = (view_name, *args, *(value for _, value in kwargs))
        if not all(isinstance(value, _REMEMBERED) for value in values):  # a template's literal is SafeString
            return super().render(context)
        try:
            current_app = context.request.current_app
        except AttributeError:
            try:
                current_app = context.request.resolver_match.namespace
            except AttributeError:
                current_app = None
        url = ""
        try:
            url = reversed_url(get_script_prefix(), get_urlconf(), view_name, args, kwargs, current_app)
        except NoReverseMatch:
            if self.asvar is None:
                raise
        if self.asvar:
            context[self.asvar] = url
            return ""
        return conditional_escape(url) if context.autoescape else url


@register.tag
def url(parser, token):
    """Django's `{% url %}`, its answers remembered (module doc)."""
    node = defaulttags.url(parser, token)
    return CachedURLNode(node.view_name, node.args, node.kwargs, node.asvar)
