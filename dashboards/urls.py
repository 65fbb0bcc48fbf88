"""The report dashboards' pages under /reports/ (included by controlplane/urls.py by name, not import)."""

from django.urls import path

from dashboards import views

urlpatterns = [
    path(f"{page}/", views.dashboard, {"page": page}, name=f"reports-{page}") for page in views.PAGES
]
