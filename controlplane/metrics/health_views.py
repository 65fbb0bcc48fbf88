"""`/healthz` and `/readyz` (controlplane.status.health): unauthenticated, no secrets, no cluster calls."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from controlplane.status import health


@never_cache
@require_GET
def healthz(request) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


@never_cache
@require_GET
def readyz(request) -> JsonResponse:
    require = health.requirements(request.GET.get("require"))
    result = health.readiness()
    return JsonResponse(result.to_dict(require=require), status=200 if result.ok(require=require) else 503)
