"""Lists answered as DRF answers them, with the per-field work planned once per list instead of once per
item: DRF's `Serializer.to_representation` walks the readable fields, resolves each one's `source` through
its generic lookup (Mapping or attribute, callables called, errors mapped) and checks for None, for every
item; for a page of 50 flows of 49 fields that lookup was most of the flows API's CPU.

`RowsSerializer` gives the same output: per item and readable field, the attribute (a plain `getattr` where
the field reads one attribute and keeps DRF's own lookup, with DRF's lookup again for whatever that
`getattr` cannot settle alone: a missing attribute, a callable, a Mapping item), None kept as None, else
the field's own `to_representation`. A child serializer with its own `to_representation` is answered by
DRF's path."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping

from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from rest_framework import ISO_8601, fields, serializers
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings


def _bool(field: fields.BooleanField):
    def shown(value):
        return value if value.__class__ is bool else field.to_representation(value)

    return shown


def _choice(field: fields.ChoiceField):
    choices = field.choice_strings_to_values

    def shown(value):
        return choices.get(value, value) if value.__class__ is str else field.to_representation(value)

    return shown


def _datetime(field: fields.DateTimeField):
    """DRF's ISO 8601 text of an aware datetime in the field's time zone (the current one, read once per
    list, when the field names none), "Z" for UTC: what `enforce_timezone` and `to_representation` give,
    in two calls instead of about ten (the flows list shows two a flow). Any other value (naive, text,
    out of range), format or a field without a time zone: the field's own method."""
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
    if output_format is None or output_format.lower() != ISO_8601 or zone is None:
        return field.to_representation

    def shown(value):
        if value.__class__ is not datetime.datetime or value.utcoffset() is None:
            return field.to_representation(value)
        try:
            text = value.astimezone(zone).isoformat()
        except OverflowError:
            return field.to_representation(value)  # DRF's "overflow" error
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return shown


def _texts(data) -> list:
    return [None if item is None else str(item) for item in data]


def _shown_by(field: fields.Field):
    """What answers `field.to_representation(value)` for a non-None value, the same answer in fewer calls
    (about 0.5 ms of the flows list's 3 ms of row work): the builtin a plain text or integer field calls, a
    model's bool as it is, a text choice looked up directly, a list of texts in one comprehension; the
    field's own method for any other field, a subclass (which may show otherwise) and any other value; an
    aware datetime as `_datetime` shows it."""
    kind = type(field)
    if kind is fields.CharField:
        return str
    if kind is fields.IntegerField:
        return int
    if kind is fields.BooleanField:
        return _bool(field)
    if kind is fields.ChoiceField:
        return _choice(field)
    if kind is fields.DateTimeField:
        return _datetime(field)
    if kind is fields.ListField and type(field.child) is fields.CharField:
        return _texts
    return field.to_representation


def _attribute_name(field: fields.Field) -> str | None:
    """The one attribute `field` reads with DRF's generic lookup, or None when it reads otherwise."""
    generic = type(field).get_attribute is fields.Field.get_attribute and len(field.source_attrs) == 1
    return field.source_attrs[0] if generic else None


class FieldsBuiltOnce:
    """A ModelSerializer whose fields are built from the model once per class, then copied for each
    instance: DRF's `ModelSerializer.get_fields` reads the model's field info and builds every field's class
    and arguments anew at each instantiation (about 0.9 ms for the flows list's 51 fields; the copy, which is
    how DRF already copies its declared fields per instance, about half that). What it builds depends on
    the class's declarations and model alone, not on the instance or its context."""

    def get_fields(self):
        cls = type(self)
        built = cls.__dict__.get("_fields_built")
        if built is None:
            built = super().get_fields()
            cls._fields_built = built
        return copy.deepcopy(built)


class RowsSerializer(serializers.ListSerializer):
    def to_representation(self, data):
        child = self.child
        if type(child).to_representation is not serializers.Serializer.to_representation:
            return super().to_representation(data)
        plan = [
            (field, field.field_name, _attribute_name(field), _shown_by(field))
            for field in child._readable_fields
        ]
        items = data.all() if isinstance(data, models.manager.BaseManager) else data
        rows = []
        for item in items:
            if isinstance(item, Mapping):  # DRF reads keys before attributes
                rows.append(child.to_representation(item))
                continue
            row = {}
            for field, name, attribute_name, shown_by in plan:
                try:
                    if attribute_name is None:
                        attribute = field.get_attribute(item)
                    else:
                        try:
                            attribute = getattr(item, attribute_name)
                        except (AttributeError, ObjectDoesNotExist):
                            attribute = field.get_attribute(item)  # its default, None or not shown
                        if callable(attribute):
                            attribute = field.get_attribute(item)  # called as DRF calls it
                except fields.SkipField:
                    continue
                shown = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
                row[name] = None if shown is None else shown_by(attribute)
            rows.append(row)
        return rows
