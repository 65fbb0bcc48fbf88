"""Lists you can work with: search, filters, sort and pagination from the query string, for every list page.

One helper for querysets (the database does the work: `icontains` over `search`, `field` lookups,
`order_by`) and for rows already in memory (what a cluster answered: topics, groups; flow summaries):
each `Sort` and `Filter` names the ORM field for the first and a `key` for the second. A page declares a
`ListSpec` and calls `list_page(request, spec, rows)`; templates render `web/_list_controls.html`
(search box and filters), `{% sort_header listing "name" "Label" %}` and `web/_pager.html`.

Query parameters: `q` (search), `sort` (a sort's name, `-name` descending), each filter's name, `page`.
A bad value is named with its fix in `listing.errors` (the page shows it and answers 400) and ignored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet

DEFAULT_PAGE_SIZE = 50


@dataclass(frozen=True)
class Sort:
    name: str  # the value of ?sort= (ascending; "-name" descending)
    field: str | None = None  # ORM ordering for querysets
    key: Callable[[Any], Any] | None = None  # value to order in-memory rows by (None sorts last)


@dataclass(frozen=True)
class Filter:
    name: str  # the query parameter
    label: str
    choices: Sequence[tuple[str, str]]  # (value, label); "" (any) is implied
    field: str | None = None  # ORM lookup the value is matched with
    key: Callable[[Any], Any] | None = None  # in-memory: a row's value(s) (a set matches any of them)


@dataclass(frozen=True)
class ListSpec:
    sorts: Sequence[Sort] = ()
    default_sort: str = ""  # "" keeps the rows' own order
    search_fields: Sequence[str] = ()  # ORM fields searched with icontains
    search_text: Callable[[Any], str] | None = None  # in-memory: the text a row is searched in
    search_label: str = "Search"
    filters: Sequence[Filter] = ()
    page_size: int = DEFAULT_PAGE_SIZE


@dataclass
class Listing:
    page: Page
    query: str  # search text
    sort: str  # applied sort ("-name" descending), "" for the rows' own order
    selected: dict[str, str]  # filter name -> chosen value ("" for any)
    spec: ListSpec
    total: int  # rows before search and filters
    params: dict[str, str] = field(default_factory=dict)  # the list's query parameters in effect
    errors: list[str] = field(default_factory=list)

    @property
    def rows(self) -> list:
        return list(self.page.object_list)

    @property
    def matched(self) -> int:
        return self.page.paginator.count

    @property
    def filters(self) -> list[tuple[Filter, str]]:
        return [(f, self.selected.get(f.name, "")) for f in self.spec.filters]

    @property
    def narrowed(self) -> bool:
        return bool(self.query or any(self.selected.values()))

    def url(self, **changes: object) -> str:
        """This list's query string with `changes` (None drops a parameter); a new sort or filter goes to
        page 1."""
        from django.utils.http import urlencode

        params = dict(self.params)
        if any(name != "page" for name in changes):
            params.pop("page", None)
        for name, value in changes.items():
            if value in (None, ""):
                params.pop(name, None)
            else:
                params[name] = str(value)
        return "?" + urlencode(params)

    @property
    def clear_url(self) -> str:
        """Without the search and the filters (the sort stays)."""
        return self.url(q=None, **{f.name: None for f in self.spec.filters})

    def sort_url(self, name: str) -> str:
        """Sorting by `name`: ascending first, descending when it already sorts ascending."""
        return self.url(sort=f"-{name}" if self.sort == name else name)

    def sort_direction(self, name: str) -> str | None:
        """ "ascending"/"descending" when the list is sorted by `name` (aria-sort), else None."""
        if self.sort == name:
            return "ascending"
        if self.sort == f"-{name}":
            return "descending"
        return None


class KeyedRows(Sequence):
    """Rows known by their keys, in order, loaded only when used: `load(keys)` gives the rows of those keys
    in that order. Cut to a page, only that page's rows are loaded; a search, a filter or a sort in memory
    loads them all, once (`list_page`). For rows that are dear to build (a flow's live roll-up)."""

    def __init__(self, keys: Sequence, load: Callable[[Sequence], list]) -> None:
        self.keys, self.load = keys, load

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.load(self.keys[index])
        return self.load([self.keys[index]])[0]

    def __iter__(self):
        return iter(self.load(self.keys))


def _in_memory(items: Sequence) -> list:
    """Rows to search, filter or sort in memory: keyed rows loaded (once), a list as it is."""
    return items if isinstance(items, list) else list(items)


def _choose_sort(raw: str, spec: ListSpec, errors: list[str]) -> tuple[Sort | None, bool, str]:
    names = {s.name: s for s in spec.sorts}
    wanted = raw or spec.default_sort
    descending = wanted.startswith("-")
    chosen = names.get(wanted.lstrip("-"))
    if wanted and chosen is None:
        errors.append(f"sort: no column {raw!r}; sort by one of {', '.join(names)} (prefix - for descending)")
        wanted = spec.default_sort
        descending = wanted.startswith("-")
        chosen = names.get(wanted.lstrip("-"))
    return chosen, descending, wanted if chosen else ""


def _attribute(row: Any, *, name: str) -> Any:
    return getattr(row, name, None)


def _in_memory_sort(rows: list, sort: Sort, descending: bool) -> list:
    key: Callable[[Any], Any] = sort.key or (lambda row: getattr(row, sort.name, None))
    known = [row for row in rows if key(row) is not None]
    unknown = [row for row in rows if key(row) is None]
    return sorted(known, key=key, reverse=descending) + unknown  # unknown values last either way


def _matches(value: Any, chosen: str) -> bool:
    if isinstance(value, set | frozenset | list | tuple):
        return chosen in {str(v) for v in value}
    return str(value) == chosen


def list_page(request, spec: ListSpec, rows: QuerySet | KeyedRows | Iterable) -> Listing:
    """`rows` searched, filtered, sorted and cut to the requested page, per `request.GET` (keyed rows: only
    the page's loaded, unless a search, filter or sort in memory needs them all)."""
    get = request.GET
    errors: list[str] = []
    query = get.get("q", "").strip()
    # Every parameter in effect is kept in the list's links (a page's own filters too), bad ones dropped.
    params = {name: value for name, value in get.items() if value and name not in ("page", "q", "sort")}
    if query:
        params["q"] = query
    total = rows.count() if isinstance(rows, QuerySet) else None
    items = rows if isinstance(rows, QuerySet | KeyedRows) else list(rows)
    total = total if total is not None else len(items)

    if query:
        if isinstance(items, QuerySet):
            items = items.filter(reduce(or_, (Q(**{f"{f}__icontains": query}) for f in spec.search_fields)))
        else:
            needle = query.casefold()
            text = spec.search_text or str
            items = [row for row in _in_memory(items) if needle in text(row).casefold()]
    selected: dict[str, str] = {}
    for flt in spec.filters:
        chosen = get.get(flt.name, "")
        if chosen and chosen not in {value for value, _ in flt.choices}:
            options = ", ".join(value for value, _ in flt.choices) or "none"
            errors.append(f"{flt.name}: no {flt.label.lower()} {chosen!r}; choose one of {options}, or any")
            chosen = ""
            params.pop(flt.name, None)
        selected[flt.name] = chosen
        if not chosen:
            continue
        if isinstance(items, QuerySet):
            items = items.filter(**{flt.field or flt.name: chosen})
        else:
            key = flt.key or functools.partial(_attribute, name=flt.name)
            items = [row for row in _in_memory(items) if _matches(key(row), chosen)]

    errors_before = len(errors)
    sort, descending, applied = _choose_sort(get.get("sort", ""), spec, errors)
    if get.get("sort") and applied and len(errors) == errors_before:  # a bad sort leaves the links
        params["sort"] = applied
    if sort is not None:
        if isinstance(items, QuerySet):
            order = sort.field or sort.name
            items = items.order_by(f"-{order}" if descending else order, "-pk" if descending else "pk")
        else:
            items = _in_memory_sort(_in_memory(items), sort, descending)
    page = Paginator(items, spec.page_size).get_page(get.get("page"))
    if page.number > 1:
        params["page"] = str(page.number)
    return Listing(
        page=page,
        query=query,
        sort=applied,
        selected=selected,
        spec=spec,
        total=total,
        params=params,
        errors=errors,
    )


def choices(values: Iterable[object]) -> list[tuple[str, str]]:
    """Filter choices from distinct values (sorted, blanks dropped), each its own label."""
    return [(str(v), str(v)) for v in sorted({v for v in values if v not in (None, "")}, key=str)]
