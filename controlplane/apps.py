from django.apps import AppConfig


class ControlplaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Mirrorplane control plane"
    default_auto_field = "django.db.models.BigAutoField"
