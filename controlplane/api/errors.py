"""Service errors as HTTP: 400 with field messages, 409 for conflicts, 429 past a rate limit, 502 when a
cluster does not answer (504 when the request's time for outbound calls ran out, 503 when the web process
already waits on other systems for its most requests: controlplane.core.call_bounds)."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from controlplane.core.crypto import SecretsKeyError
from controlplane.core.errors import ClusterUnavailable, RateLimited, ServiceConflict, ServiceValidationError


def exception_handler(exc, context):
    if isinstance(exc, ServiceValidationError):
        body: dict = dict(exc.errors)
        if exc.details:
            body["details"] = exc.details
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ServiceConflict):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ClusterUnavailable):
        return Response({"detail": str(exc)}, status=exc.http_status)
    if isinstance(exc, RateLimited):
        return Response(
            {"detail": str(exc)},
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    if isinstance(exc, SecretsKeyError):
        return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    return drf_exception_handler(exc, context)
