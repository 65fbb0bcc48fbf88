from django.apps import AppConfig


class WebConfig(AppConfig):
    """The web UI (an app so Django finds its template tags)."""

    name = "controlplane.web"
    label = "web"
