"""Statements compiled once per process: the querysets a page asks on every request, run with the request's
values without building and compiling them again.

Django builds every queryset anew (filters resolved, joins set up, expressions resolved) and compiles it to
SQL on every evaluation: on a flow's page about 4 ms of its 14 ms of CPU (20 statements), the same SQL each
time with other parameters. A `Statement` wraps the function that builds a queryset. Per shape (the
`shape` arguments: what decides the SQL's text, such as a page's slice or a sort) it builds the queryset
once with stand-ins for the values (the keyword arguments), compiles it, and notes where each stand-in
landed among the SQL's parameters. A call then runs that SQL with its values in those places, and
Django's own iterables turn the rows into what the queryset gives (model instances with their
`select_related` ones, dicts or tuples), as `list(queryset)` would.

The values must be compared as they are (an id, a text, a time, or a collection of them for `__in`, whose
length is part of the shape), never transformed by the lookup (a LIKE pattern, JSON) and never deciding the
SQL's text otherwise; a value that is None or a bool is part of the shape (it usually decides the SQL: `IS
NULL`, a filter left out), passed to the builder as it is. A stand-in that does not come through unchanged (or shows up transformed) leaves that shape uncached: it is built and
compiled each call, as before, and the log says so once. With `MIRRORPLANE_STATEMENTS_CHECK` on (the test
suite sets it) every call also builds and compiles the queryset with its values and raises
`StatementMismatch` when the SQL or its parameters differ from the cached ones.
"""

from __future__ import annotations

import copy
import datetime
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet

log = logging.getLogger(__name__)

SHAPES_KEPT = 64  # per statement: shapes beyond these (say, deep page offsets) push out the oldest
_INT_STAND_IN = -(2**62)  # below any id, count or offset the control plane stores
_FLOAT_STAND_IN = -3.0e300
_UNPLANNED = object()


class StatementMismatch(AssertionError):
    """A cached statement's SQL or parameters differ from what the ORM compiles for the same call."""


def _stand_in(name: str, value: Any, index: int) -> Any:
    """A value of `value`'s type that no real call passes, unique to the `index`th parameter."""
    if isinstance(value, int):
        return _INT_STAND_IN - index
    if isinstance(value, float):
        return _FLOAT_STAND_IN * (index + 1)
    if isinstance(value, str):
        return f"\x00stand-in {index}\x00"
    if isinstance(value, datetime.datetime):
        return datetime.datetime(1, 1, 1, tzinfo=value.tzinfo) + datetime.timedelta(microseconds=index + 1)
    if isinstance(value, uuid.UUID):
        return uuid.UUID(int=index + 1)
    raise TypeError(f"statement value {name}: {type(value).__name__} is not a compared scalar")


def _stand_ins(name: str, value: Any, index: int) -> Any:
    """`_stand_in` of a scalar; a list of them (the `index`th parameter's, numbered apart) of a collection;
    None or a bool as it is (part of the shape, `_key`)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_stand_in(name, item, index * 100_000 + offset + 1) for offset, item in enumerate(value)]
    return _stand_in(name, value, index)


def _derived(param: Any) -> bool:
    """Whether a parameter was computed from a stand-in without being it (a pattern, an offset)."""
    if isinstance(param, str):
        return "\x00stand-in " in param
    if isinstance(param, int) and not isinstance(param, bool):
        return param <= _INT_STAND_IN // 2
    if isinstance(param, float):
        return param <= _FLOAT_STAND_IN / 2
    if isinstance(param, datetime.datetime):
        return param.year == 1
    return False


@dataclass(frozen=True)
class _Plan:
    queryset: QuerySet  # built with the stand-ins and compiled (its compiler's select and classes filled)
    compiler: Any
    sql: str
    params: tuple
    # (position among the SQL's parameters, the value's name, its index in a collection or None)
    slots: tuple[tuple[int, str, int | None], ...]

    def params_for(self, values: Mapping[str, Any]) -> tuple:
        params = list(self.params)
        items = {name: list(value) for name, value in values.items() if isinstance(value, (set, frozenset))}
        for position, name, index in self.slots:
            params[position] = values[name] if index is None else items.get(name, values[name])[index]
        return tuple(params)


class _Query:
    """The plan's query, answering `get_compiler` with the compiler that runs the cached SQL."""

    def __init__(self, query, compiler) -> None:
        self._query, self._compiler = query, compiler

    def get_compiler(self, using=None, connection=None, elide_empty=True):
        return self._compiler

    def __getattr__(self, name: str) -> Any:
        return getattr(self._query, name)


class _Run:
    """What Django's iterables read of a queryset, for one call: the plan's queryset with its compiler."""

    def __init__(self, queryset: QuerySet, compiler) -> None:
        self._queryset = queryset
        self.query = _Query(queryset.query, compiler)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queryset, name)


class Statement:
    """`Statement(build)`: `statement(shape=..., **values)` gives `list(build(*shape, **values))`."""

    def __init__(self, build: Callable[..., QuerySet]) -> None:
        self._build = build
        self._plans: OrderedDict[Hashable, _Plan | None] = OrderedDict()
        self._lock = threading.Lock()
        self.__doc__ = build.__doc__
        self.__name__ = getattr(build, "__name__", "statement")

    def __call__(self, *shape: Hashable, **values: Any) -> list:
        key = _key(shape, values)
        found = self._plans.get(key, _UNPLANNED)  # never a KeyError: another thread may push it out
        plan = self._plan(shape, values) if found is _UNPLANNED else cast(_Plan | None, found)
        if plan is None:
            return list(self._build(*shape, **values))
        params = plan.params_for(values)
        if settings.MIRRORPLANE_STATEMENTS_CHECK:
            self._check(plan, shape, values, params)
        compiler = copy.copy(plan.compiler)  # this call's: this thread's connection, these parameters
        compiler.connection = connections[plan.queryset.db]
        sql = plan.sql
        compiler.as_sql = lambda *args, **kwargs: (sql, params)
        return list(plan.queryset._iterable_class(_Run(plan.queryset, compiler)))

    def _plan(self, shape: tuple, values: Mapping[str, Any]) -> _Plan | None:
        key = _key(shape, values)
        stand_ins = {
            name: _stand_ins(name, value, index) for index, (name, value) in enumerate(values.items())
        }
        queryset = self._build(*shape, **stand_ins)
        compiler = queryset.query.get_compiler(using=queryset.db)
        try:
            sql, params = compiler.as_sql()
        except EmptyResultSet:  # an empty collection: nothing to cache, the ORM answers [] at once
            return self._keep(key, None)
        wanted = {
            (type(item), item): (name, index if isinstance(value, list) else None)
            for name, value in stand_ins.items()
            if not _in_shape(value)
            for index, item in (enumerate(value) if isinstance(value, list) else [(0, value)])
        }
        slots = tuple(
            (position, *wanted[(type(param), param)])
            for position, param in enumerate(params)
            if _hashable(param) and (type(param), param) in wanted
        )
        found = {(name, index) for _, name, index in slots}
        missing = sorted({name for name, index in wanted.values() if (name, index) not in found})
        filled = {position for position, _, _ in slots}
        derived = [
            param for position, param in enumerate(params) if position not in filled and _derived(param)
        ]
        plan: _Plan | None = _Plan(queryset, compiler, sql, tuple(params), slots)
        if missing or derived or queryset._prefetch_related_lookups or not sql:
            log.warning(
                "statement %s (shape %r): values %s are not compared as they are; built and compiled each call",
                self.__name__,
                shape,
                ", ".join(missing) or ", ".join(map(repr, derived)) or "(prefetch)",
            )
            plan = None
        return self._keep(key, plan)

    def _keep(self, key: Hashable, plan: _Plan | None) -> _Plan | None:
        with self._lock:
            self._plans[key] = plan
            while len(self._plans) > SHAPES_KEPT:
                self._plans.popitem(last=False)
        return plan

    def _check(self, plan: _Plan, shape: tuple, values: Mapping[str, Any], params: tuple) -> None:
        queryset = self._build(*shape, **values)
        sql, expected = queryset.query.get_compiler(using=queryset.db).as_sql()
        if sql != plan.sql or tuple(expected) != params:
            raise StatementMismatch(
                f"statement {self.__name__} (shape {shape!r}, values {dict(values)!r}): the ORM compiles\n"
                f"{sql} {tuple(expected)!r}\nthe cache has\n{plan.sql} {params!r}"
            )


def first_row(rows: QuerySet) -> QuerySet:
    """`rows` cut to what `rows.first()` reads (the first by its order, by primary key when unordered): a
    statement's builder returns this, its caller takes `[0]` of a non-empty answer."""
    return (rows if rows.ordered else rows.order_by("pk"))[:1]


def _key(shape: tuple, values: Mapping[str, Any]) -> Hashable:
    """A plan's key: the shape, the values' names, the length of each collection among them, and those
    that are None or a bool."""
    return (
        shape,
        tuple(
            (name, len(value))
            if isinstance(value, (list, tuple, set, frozenset))
            else (name, value)
            if _in_shape(value)
            else name
            for name, value in values.items()
        ),
    )


def _in_shape(value: Any) -> bool:
    return value is None or isinstance(value, bool)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def statement(build: Callable[..., QuerySet]) -> Statement:
    """Decorator: the queryset-building function as a `Statement`."""
    return Statement(build)
