"""URLs: liveness and readiness (/healthz, /readyz), the REST API under /api/v1/, its OpenAPI schema and Swagger UI, the Django admin, the web UI and
the report dashboards."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from controlplane import health_views, metrics_view

urlpatterns = [
    path("healthz", health_views.healthz, name="healthz"),
    path("readyz", health_views.readyz, name="readyz"),
    path("metrics", metrics_view.metrics, name="metrics"),
    path("api/v1/", include("controlplane.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    # The report dashboards (charts from dashboards.figures): a dotted name, so no import of dashboards.
    path("reports/", include("dashboards.urls")),
    path("", include("controlplane.web.urls")),
]
