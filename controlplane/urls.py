"""URLs: liveness and readiness (/healthz, /readyz), the REST API under /api/v1/, its OpenAPI schema and Swagger UI, the Django admin, the web UI and
the report dashboards."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from controlplane.metrics import health_views
from controlplane.metrics import views as metrics_view
from controlplane.web import login

urlpatterns = [
    path("healthz", health_views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico on every page (pages without the <link rel="icon"> too: API docs, errors).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True), name="favicon"),
    path("readyz", health_views.readyz, name="readyz"),
    path("metrics", metrics_view.metrics, name="metrics"),
    path("api/v1/", include("controlplane.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Before the admin site's own: with passwords turned off (single sign-on only) it sends to /login/.
    path("admin/login/", login.admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
    # The report dashboards (charts from dashboards.figures): a dotted name, so no import of dashboards.
    path("reports/", include("dashboards.urls")),
    path("", include("controlplane.web.urls")),
]
