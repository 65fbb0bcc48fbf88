"""`GET /metrics`: Prometheus text exposition (controlplane.metrics.prometheus), for a scrape or a signed-in user.

Access, by settings: with METRICS_BEARER_TOKEN set, a scrape sends `Authorization: Bearer <token>`
(Prometheus's `authorization` / `bearer_token_file`); with METRICS_OPEN true anyone may read it (a
network that only Prometheus reaches); a signed-in user with any role may always read it. Otherwise 401,
saying which setting to use.

The families come rendered ahead by the metadata worker while they are young enough (`rendered`), else
read now; either way with their age (`mirrorplane_metrics_age_seconds`, HTTP `Age`), and the web
processes' own metrics read now.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from controlplane.core.roles import role_of
from controlplane.metrics import prometheus, rendered


def _bearer_ok(request) -> bool:
    token = settings.METRICS_BEARER_TOKEN
    header = request.headers.get("Authorization", "")
    return bool(token) and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), token)


def _allowed(request) -> bool:
    if settings.METRICS_OPEN or _bearer_ok(request):
        return True
    user = request.user
    return user.is_authenticated and role_of(user) is not None


@never_cache
@require_GET
def metrics(request) -> HttpResponse:
    if not _allowed(request):
        response = HttpResponse(
            "metrics need `Authorization: Bearer <METRICS_BEARER_TOKEN>` (set METRICS_BEARER_TOKEN on the "
            "web, and the same token in Prometheus's scrape config), a signed-in user, or METRICS_OPEN=true\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="mirrorplane-metrics"'
        return response
    found = rendered.scraped()
    text, age_s = found if found is not None else (prometheus.families(), 0.0)
    body = text + rendered.age_family(age_s).encode() + prometheus.web_processes()
    response = HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
    response["Age"] = str(int(age_s))
    return response
