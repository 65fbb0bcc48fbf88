"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit with OIDC on, run as a
process of its own (server.py) under its own settings module."""
