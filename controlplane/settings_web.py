"""Settings of the web UI; part of the one settings module (settings.py star-imports it and lists
`controlplane.web.apps.WebConfig` in INSTALLED_APPS, where Django finds the UI's template tags)."""

LOGIN_URL = "web:login"
LOGIN_REDIRECT_URL = "web:overview"
LOGOUT_REDIRECT_URL = "web:login"
