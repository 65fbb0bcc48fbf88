"""Serializer fields for numbers with the bounds of controlplane.core.bounds: every integer the API reads
fits a Kafka offset and a bigint column, every float is finite (DRF's FloatField takes "nan" and "1e400")."""

from __future__ import annotations

import math

from rest_framework import serializers

from controlplane.core.bounds import INT64_MAX


class WholeNumberField(serializers.IntegerField):
    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", INT64_MAX)
        super().__init__(**kwargs)


class FiniteFloatField(serializers.FloatField):
    default_error_messages = {"not_finite": "A finite number is required, e.g. 60."}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("not_finite")
        return value
