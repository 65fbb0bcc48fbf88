"""The API's JSON parser: DRF's, with the nesting bounded (controlplane.core.bounds) so a body nested
100,000 deep is a 400, not a RecursionError."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from controlplane.core.bounds import json_depth_error


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            data = None
            problem = "JSON nested deeper than the parser recurses: flatten the body"
        else:
            problem = json_depth_error(data)
        if problem:
            raise ParseError(problem)
        return data
