"""API answers shared for a moment (`controlplane.core.microcache`): JSON is shared as its rendered bytes
(rendering 50 flows' JSON is most of what a shared answer would cost each request), any other renderer (the
browsable API) as the data it renders. `Age` says how old the answer is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from controlplane.api.permissions import request_role
from controlplane.core import microcache


def shared_response(view, request, name: str, build: Callable[[], Any]):
    """The answer to `request` of `build()`'s data, shared by the requests of the same URL, role and
    representation (`Accept`'s media type and its parameters, such as `indent`)."""
    renderer = request.accepted_renderer
    parts = (request.build_absolute_uri(), request_role(request), request.accepted_media_type)
    if isinstance(renderer, JSONRenderer):
        body, built_at = microcache.shared(
            name,
            parts,
            lambda: renderer.render(build(), request.accepted_media_type, view.get_renderer_context()),
        )
        return HttpResponse(body, content_type=renderer.media_type, headers=microcache.age_header(built_at))
    data, built_at = microcache.shared(name, parts, build)
    return Response(data, headers=microcache.age_header(built_at))
