"""Settings of the web's defences; part of the one settings module (settings.py star-imports it, and lists
`axes` in INSTALLED_APPS and the CSP and axes middlewares). docs/operations.md, "HTTPS and login
throttling", shows them in the compose and Kubernetes shapes.

| variable | default | meaning |
|---|---|---|
| MIRRORPLANE_HTTPS | false | the site is reached over HTTPS through a TLS-terminating proxy that sets `X-Forwarded-Proto`: cookies are Secure, plain HTTP is redirected, HSTS is sent, the proxy's header is trusted |
| SECURE_HSTS_SECONDS | 31536000 with MIRRORPLANE_HTTPS, else 0 | HSTS max-age |
| SECURE_HSTS_INCLUDE_SUBDOMAINS | true | HSTS covers the subdomains |
| SECURE_HSTS_PRELOAD | false | ask browsers' preload lists (the domain owner's decision, at hstspreload.org) |
| SESSION_COOKIE_AGE | 28800 (8 hours) | a signed-in session lasts this long from its sign-in, whatever it did since (controlplane/core/sessions.py), then the login page again (through the identity provider: the provider asks again) |
| LOGIN_FAILURE_LIMIT | 5 | wrong passwords for one username from one address that lock it out (429, the right password too) |
| LOGIN_COOLOFF_MINUTES | 15 | how long a lockout lasts (`manage.py axes_reset` lifts them all) |
| TRUSTED_PROXY_COUNT | 0 | reverse proxies in front of the web, each appending the address it saw to `X-Forwarded-For` (nginx's `$proxy_add_x_forwarded_for`): the client's address, for login throttling and the audit log, is that many entries from its right (controlplane/core/client_address.py); 0: the connection's address, the header ignored |
"""

from __future__ import annotations

import datetime
import logging

import environ
from csp.constants import NONE, SELF, UNSAFE_EVAL, UNSAFE_INLINE

env = environ.Env()

MIRRORPLANE_HTTPS = env.bool("MIRRORPLANE_HTTPS", default=False)
if not MIRRORPLANE_HTTPS and not env.bool("DEBUG", default=False):
    logging.getLogger("controlplane.settings").warning(
        "MIRRORPLANE_HTTPS is not set: cookies are sent over plain HTTP; behind a TLS proxy set it to true"
    )
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = MIRRORPLANE_HTTPS
# The proxy terminates TLS and says so; without MIRRORPLANE_HTTPS a client could claim it.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if MIRRORPLANE_HTTPS else None
# /healthz, /readyz and /metrics answer the orchestrator's and Prometheus's plain-HTTP probes in the pod.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000 if MIRRORPLANE_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# check --deploy asks for preload; joining browsers' preload lists is the domain owner's call (above).
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=8 * 3600)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"

# Content Security Policy (django-csp): scripts and styles from this site only (Plotly.js and htmx are
# served from static/), no inline script. 'unsafe-eval': htmx evaluates the polling triggers' filters
# (`every 5s [...]`); 'unsafe-inline' styles: Plotly and htmx set style attributes.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, UNSAFE_EVAL],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Login throttling (django-axes) on /login/ and /admin/login/: both authenticate through Django's backends.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = datetime.timedelta(minutes=env.int("LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "controlplane.core.client_address.client_address"
