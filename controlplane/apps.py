from django.apps import AppConfig


class ControlplaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Mirrorplane control plane"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Receivers: sessions' stamps each sign-in, changes' starts the shared answers' generation.
        import controlplane.core.sessions
        import controlplane.flows.changes  # noqa: F401

        # A wrong single sign-on setting stops the process with its message, not the first sign-in.
        from controlplane.core.sso import oidc_settings

        oidc_settings()
