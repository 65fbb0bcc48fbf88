from django.apps import AppConfig


class OidcProviderConfig(AppConfig):
    name = "tests.oidc_provider"
    label = "oidc_provider"
