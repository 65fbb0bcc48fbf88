"""The one settings module: everything comes from the environment, with defaults that run on one machine.

| variable | default |
|---|---|
| DATABASE_URL | SQLite file var/mirrorplane.sqlite3 (PostgreSQL when set, e.g. postgres://user@host/db). Each web thread and worker keeps its connection 60 s, checked before reuse; `?conn_max_age=0` closes it after every request |
| REDIS_URL | redis://127.0.0.1:6379/0 |
| METRICS_DIR | var/metrics (the metrics lake: Parquet files; a directory every worker shares, or s3://bucket/prefix) |
| SECRET_KEY | required unless DEBUG is true (then a development key, warned about) |
| MIRRORPLANE_SECRETS_KEY | Fernet key(s) for secrets at rest, comma-separated, newest first; by default one derived from SECRET_KEY (warned about) |
| DEBUG | false |

With DEBUG false (production) the process refuses to start on the built-in development SECRET_KEY, and
so on the secrets key derived from it: both are public, in this file.
| ALLOWED_HOSTS | localhost, 127.0.0.1, [::1] |
| METRICS_BEARER_TOKEN | unset (a Prometheus scrape sends `Authorization: Bearer <token>`) |
| METRICS_OPEN | false (true: /metrics needs no token) |
| MIRRORPLANE_METRICS_PARTITION_LEVEL | auto (`partition`: every partition's series in /metrics; `topic`: per topic only; `auto`: per topic only for flows of more than MIRRORPLANE_METRICS_PARTITION_LIMIT partitions; docs/metrics.md) |
| MIRRORPLANE_METRICS_PARTITION_LIMIT | 1000 (the partitions a flow may have and still be exported per partition under `auto`) |
| MIRRORPLANE_WEB_READ_TIMEOUT_S | 3.0 (one web request's time for all its calls to other systems together: Kafka reads (topics, records, groups, offset mapping, failover plan) and schema-registry lookups; past it the page shows what it has with a note, or answers 504 naming what was not asked; controlplane/core/call_bounds.py) |
| MIRRORPLANE_WEB_OUTBOUND_REQUESTS | 6 (requests of one web process that may wait on other systems at once; one more answers 503 at once. Keep it below gunicorn's `--threads` (8 in the Dockerfile), so every process keeps threads for /healthz and the pages that read only the database) |
| MIRRORPLANE_CLUSTERS | kafka (how the control plane reaches its clusters: `kafka`, over the Kafka protocol; `memory`, in-memory clusters held by the process, one per bootstrap address, for tests and demos: controlplane/flows/clusters.py) |
| MIRRORPLANE_CLUSTER_HOSTS_ALLOWED | empty: any host (bootstrap hosts clusters may name, comma-separated: host names, `*.domain`, IP networks such as 10.20.0.0/16; the console connects there, so set it to keep it from probing other addresses) |
| MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED | empty: any host name, public addresses only (what the server and its workers fetch for a user: schema registries, alert webhooks and Slack, the OpenID provider; comma-separated host names, `*.domain`, IP networks. Every address a host resolves to must be public or inside a listed network: list 10.0.0.0/8 for registries on a private network, 127.0.0.1 for one on this machine; docs/security.md) |
| CLUSTER_CHECK_RATE_PER_MINUTE | 20 (cluster checks, "Test connection", one user may run per minute; 0: no limit) |
| MIRRORPLANE_API_TOKEN_TTL_DAYS | 90 (an API token expires this many days after it was issued or rotated; 0: never) |
| MIRRORPLANE_API_DOCS_OPEN | false (the OpenAPI schema /api/schema/ and its Swagger UI /api/docs/ need a signed-in user or a token; true: open to anyone) |
| FAILOVER_PLAN_RATE_PER_MINUTE | 12 (failover plans one user may read per minute; 0: no limit) |
| OFFSET_MAPPING_RATE_PER_MINUTE | 60 (offset mapping requests one user may send per minute; 0: no limit) |
| OFFSET_MAPPING_MAX_ITEMS | 10000 (the most offsets one offset mapping request translates) |
| MIRRORPLANE_BASE_URL | http://localhost:8000 (the links in alert notifications) |
| MIRRORPLANE_IMPORT_ENV_ALLOWED | empty (the server's environment variables an MM2 import's `${env:VAR}` may read, comma-separated; `PREFIX_*` allows every name with that prefix; each value read is stored as a secret) |
| MIRRORPLANE_BROWSE_MASKED_TOPICS | empty (regexes, comma-separated, matched against whole topic names: the message browser shows viewers these topics' values and header values as "masked") |
| MIRRORPLANE_OIDC_ENABLED | false (single sign-on through an OpenID Connect provider: the login page offers "Sign in with <provider>"; docs/sso.md) |
| MIRRORPLANE_OIDC_ISSUER | required with OIDC (the provider's issuer URL, e.g. https://keycloak.example.com/realms/kafka) |
| MIRRORPLANE_OIDC_DISCOVERY_URL | the issuer + /.well-known/openid-configuration |
| MIRRORPLANE_OIDC_CLIENT_ID | required with OIDC |
| MIRRORPLANE_OIDC_CLIENT_SECRET | required with OIDC (a secret: never shown, never logged) |
| MIRRORPLANE_OIDC_SCOPES | openid profile email (add `groups` for Dex and Okta) |
| MIRRORPLANE_OIDC_GROUPS_CLAIM | groups (the ID token or userinfo claim listing the user's groups) |
| MIRRORPLANE_OIDC_USERNAME_CLAIM | preferred_username (then email, then sub: the name of a user created at their first sign-in) |
| MIRRORPLANE_OIDC_ROLE_MAP | empty: nobody gets in (`group=role` comma-separated, roles viewer/operator/admin; the highest wins; `*=role` for everyone the provider signs in, e.g. kafka-admins=admin,kafka-oncall=operator,*=viewer) |
| MIRRORPLANE_OIDC_PROVIDER_NAME | SSO (the login button's "Sign in with <name>") |
| MIRRORPLANE_OIDC_PASSWORD_LOGIN | true (false with OIDC: local usernames and passwords no longer sign in, on /login/ and /admin/login/) |
| MIRRORPLANE_OIDC_TIMEOUT_S | 5.0 (the bound of each request to the provider a sign-in makes) |
| MIRRORPLANE_OIDC_API_TOKEN_TTL_HOURS | 8 (an API token of a user who signs in through the provider expires this soon: someone who left the provider loses the API with their session) |
| MIRRORPLANE_BROWSE_MAX_SCANNED | 10000 (the most records one message-browser search reads, shared between the topic's partitions; a search also stops at the request's MIRRORPLANE_WEB_READ_TIMEOUT_S) |
| LOG_LEVEL | INFO (the root logger) |
| CELERY_TASK_LOG_LEVEL | WARNING (Celery's per-task "received"/"succeeded" lines are INFO; failures stay visible) |
| EMAIL_BACKEND, EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS, EMAIL_USE_SSL, DEFAULT_FROM_EMAIL | Django's (SMTP on localhost:25; the backend reaches EMAIL_HOST only where MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED allows: list 127.0.0.1 for a relay on this machine); email alert channels use them |
"""

from __future__ import annotations

import base64
import hashlib
import logging
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
_log = logging.getLogger("controlplane.settings")

DEBUG = env.bool("DEBUG", default=False)

_DEV_SECRET_KEY = "mirrorplane-development-key-do-not-use-in-production"
SECRET_KEY = env.str("SECRET_KEY", default=_DEV_SECRET_KEY)
if SECRET_KEY == _DEV_SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set (or is the public development key) and DEBUG is false: refusing to start. "
            "Set SECRET_KEY to a long random value, e.g. "
            "SECRET_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(50))'), and "
            "MIRRORPLANE_SECRETS_KEY=$(python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())') for secrets at rest; or set DEBUG=true on a development "
            "machine"
        )
    _log.warning(
        "SECRET_KEY is not set: using the development key (DEBUG only; set SECRET_KEY in production)"
    )

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])


def _derived_fernet_key(secret_key: str) -> str:
    return base64.urlsafe_b64encode(
        hashlib.sha256(f"mirrorplane-secrets:{secret_key}".encode()).digest()
    ).decode()


# Newest key first: it encrypts; every key listed can decrypt (see `manage.py rotate_secrets_key`).
MIRRORPLANE_SECRETS_KEYS = env.list("MIRRORPLANE_SECRETS_KEY", default=[])
if not MIRRORPLANE_SECRETS_KEYS:
    _log.warning(
        "MIRRORPLANE_SECRETS_KEY is not set: cluster secrets are encrypted with a key derived from SECRET_KEY "
        "(generate one with `manage.py rotate_secrets_key --generate-only` and set it in production)"
    )
    MIRRORPLANE_SECRETS_KEYS = [_derived_fernet_key(SECRET_KEY)]

REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
# Shared by every web process (rate limits): Redis, which the runtime needs anyway.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "mirrorplane",
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
}
# Seconds the flows list (page and API) is shared by the clients asking for it (controlplane/core/microcache.py;
# a configuration change is seen at once): 0 builds every answer for its request.
MIRRORPLANE_SHARED_ANSWER_S = env.int("MIRRORPLANE_SHARED_ANSWER_S", default=2)
if MIRRORPLANE_SHARED_ANSWER_S < 0:
    raise ImproperlyConfigured(
        f"MIRRORPLANE_SHARED_ANSWER_S={MIRRORPLANE_SHARED_ANSWER_S}: 0 or more seconds"
    )
# /metrics: a scrape's bearer token (Prometheus `authorization`), or open to anyone who reaches it.
METRICS_BEARER_TOKEN = env.str("METRICS_BEARER_TOKEN", default="")
METRICS_OPEN = env.bool("METRICS_OPEN", default=False)
# /metrics per partition (MM2's names) or per topic only, for large flows (docs/metrics.md, "Large flows").
MIRRORPLANE_METRICS_PARTITION_LEVEL = env.str("MIRRORPLANE_METRICS_PARTITION_LEVEL", default="auto")
if MIRRORPLANE_METRICS_PARTITION_LEVEL not in ("partition", "topic", "auto"):
    raise ImproperlyConfigured(
        f"MIRRORPLANE_METRICS_PARTITION_LEVEL={MIRRORPLANE_METRICS_PARTITION_LEVEL!r}: choose partition, "
        "topic or auto"
    )
MIRRORPLANE_METRICS_PARTITION_LIMIT = env.int("MIRRORPLANE_METRICS_PARTITION_LIMIT", default=1000)
# One web request's time for all its outbound calls (Kafka reads, registry lookups), and the requests of a
# process that may wait on other systems at once (controlplane/core/call_bounds.py).
MIRRORPLANE_WEB_READ_TIMEOUT_S = env.float("MIRRORPLANE_WEB_READ_TIMEOUT_S", default=3.0)
MIRRORPLANE_WEB_OUTBOUND_REQUESTS = env.int("MIRRORPLANE_WEB_OUTBOUND_REQUESTS", default=6)
# Every cached statement also compiled by the ORM and compared (controlplane/core/statements.py): the test
# suite's setting, not an operator's.
MIRRORPLANE_STATEMENTS_CHECK = env.bool("MIRRORPLANE_STATEMENTS_CHECK", default=False)
# The clusters' implementation: Apache Kafka, or in-memory clusters (controlplane/flows/clusters.py).
MIRRORPLANE_CLUSTERS = env.str("MIRRORPLANE_CLUSTERS", default="kafka")
if MIRRORPLANE_CLUSTERS not in ("kafka", "memory"):
    raise ImproperlyConfigured(f"MIRRORPLANE_CLUSTERS={MIRRORPLANE_CLUSTERS!r}: choose kafka or memory")
# Hosts clusters may name (host names, *.domain, IP networks); empty: any. Checks and pages connect there.
MIRRORPLANE_CLUSTER_HOSTS_ALLOWED = env.list("MIRRORPLANE_CLUSTER_HOSTS_ALLOWED", default=[])
# Hosts and networks outbound URLs may reach (registries, webhooks, OpenID provider): replication.outbound.
MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED = env.list("MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED", default=[])
# Cluster checks ("Test connection") one user may run per minute; 0 turns the limit off.
CLUSTER_CHECK_RATE_PER_MINUTE = env.int("CLUSTER_CHECK_RATE_PER_MINUTE", default=20)
# Days an API token is valid once issued or rotated (manage.py rotate_api_token, POST tokens/rotate/); 0: no expiry.
MIRRORPLANE_API_TOKEN_TTL_DAYS = env.int("MIRRORPLANE_API_TOKEN_TTL_DAYS", default=90)
# /api/schema/ and /api/docs/: open to anyone (true) or to signed-in users only (false).
MIRRORPLANE_API_DOCS_OPEN = env.bool("MIRRORPLANE_API_DOCS_OPEN", default=False)
# Failover plans per user and minute (each opens clients on both clusters); 0 turns the limit off.
FAILOVER_PLAN_RATE_PER_MINUTE = env.int("FAILOVER_PLAN_RATE_PER_MINUTE", default=12)
# Offset mapping requests per user and minute (each reads the offset syncs); 0 turns the limit off.
OFFSET_MAPPING_RATE_PER_MINUTE = env.int("OFFSET_MAPPING_RATE_PER_MINUTE", default=60)
# The most (topic, partition, offset) items one offset mapping request may translate.
OFFSET_MAPPING_MAX_ITEMS = env.int("OFFSET_MAPPING_MAX_ITEMS", default=10_000)
# The server's environment variables an MM2 import's ${env:VAR} may read (`NAME`, or `PREFIX_*`); none by
# default: the web server's environment holds SECRET_KEY, DATABASE_URL and the secrets key.
MIRRORPLANE_IMPORT_ENV_ALLOWED = env.list("MIRRORPLANE_IMPORT_ENV_ALLOWED", default=[])
# Topics whose record values (and header values) the message browser masks for viewers.
MIRRORPLANE_BROWSE_MASKED_TOPICS = env.list("MIRRORPLANE_BROWSE_MASKED_TOPICS", default=[])
# Single sign-on (OpenID Connect): checked at start-up by controlplane.core.sso.oidc_settings (apps.py).
MIRRORPLANE_OIDC_ENABLED = env.bool("MIRRORPLANE_OIDC_ENABLED", default=False)
MIRRORPLANE_OIDC_ISSUER = env.str("MIRRORPLANE_OIDC_ISSUER", default="")
MIRRORPLANE_OIDC_DISCOVERY_URL = env.str("MIRRORPLANE_OIDC_DISCOVERY_URL", default="")
MIRRORPLANE_OIDC_CLIENT_ID = env.str("MIRRORPLANE_OIDC_CLIENT_ID", default="")
MIRRORPLANE_OIDC_CLIENT_SECRET = env.str("MIRRORPLANE_OIDC_CLIENT_SECRET", default="")
MIRRORPLANE_OIDC_SCOPES = env.str("MIRRORPLANE_OIDC_SCOPES", default="openid profile email")
MIRRORPLANE_OIDC_GROUPS_CLAIM = env.str("MIRRORPLANE_OIDC_GROUPS_CLAIM", default="groups")
MIRRORPLANE_OIDC_USERNAME_CLAIM = env.str("MIRRORPLANE_OIDC_USERNAME_CLAIM", default="preferred_username")
MIRRORPLANE_OIDC_ROLE_MAP = env.list("MIRRORPLANE_OIDC_ROLE_MAP", default=[])
MIRRORPLANE_OIDC_PROVIDER_NAME = env.str("MIRRORPLANE_OIDC_PROVIDER_NAME", default="SSO")
MIRRORPLANE_OIDC_PASSWORD_LOGIN = env.bool("MIRRORPLANE_OIDC_PASSWORD_LOGIN", default=True)
MIRRORPLANE_OIDC_TIMEOUT_S = env.float("MIRRORPLANE_OIDC_TIMEOUT_S", default=5.0)
MIRRORPLANE_OIDC_API_TOKEN_TTL_HOURS = env.int("MIRRORPLANE_OIDC_API_TOKEN_TTL_HOURS", default=8)
# The most records one message-browser search reads (all partitions together), within the web read timeout.
MIRRORPLANE_BROWSE_MAX_SCANNED = env.int("MIRRORPLANE_BROWSE_MAX_SCANNED", default=10_000)
# Alert notifications link to the flow page here; email channels use Django's mail settings.
MIRRORPLANE_BASE_URL = env.str("MIRRORPLANE_BASE_URL", default="http://localhost:8000").rstrip("/")
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="controlplane.core.outbound.GuardedEmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=10.0)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="mirrorplane@localhost")
# A directory (shared by every worker machine and the report job) or an object store URL
# (s3://bucket/prefix?endpoint_override=host:port): docs/analytics.md, "Where the lake lives".
_METRICS_DIR = env.str("METRICS_DIR", default=str(VAR_DIR / "metrics"))
METRICS_DIR: Path | str = _METRICS_DIR if "://" in _METRICS_DIR else Path(_METRICS_DIR)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "controlplane.apps.ControlplaneConfig",
    "controlplane.web.apps.WebConfig",
    "workers.apps.WorkersConfig",
    "axes",
]

MIDDLEWARE = [
    # First: the request's deadline for outbound calls starts when it arrives, its slot is given back last.
    "controlplane.core.call_bounds.RequestDeadline",
    "django.middleware.security.SecurityMiddleware",
    "controlplane.core.client_address.ClientAddressMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "controlplane.core.sessions.SessionCookieMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "controlplane.core.sessions.SessionAgeMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # `{% url %}` with its answers remembered (controlplane/web/templatetags/cached_urls.py).
            "builtins": ["controlplane.web.templatetags.cached_urls"],
        },
    },
]

_SQLITE_DEFAULT = f"sqlite:///{VAR_DIR / 'mirrorplane.sqlite3'}"
DATABASES = {"default": env.db("DATABASE_URL", default=_SQLITE_DEFAULT)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo's SQLite is written by the web server and several worker processes at once: transactions
    # take the write lock when they begin (a deferred one that reads, then writes, fails at once with
    # "database is locked" when another process writes), wait up to 20 s for it, and WAL lets readers go on.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"transaction_mode": "IMMEDIATE", "timeout": 20, "init_command": "PRAGMA journal_mode=WAL;"}
    )
# Connections kept (each thread its own, checked before reuse): a new PostgreSQL connection per request is
# a backend process forked and its caches filled again, about a sixth of the web's CPU per request at 500
# flows (bench api). At most gunicorn's workers x threads connections per web (24 in the Dockerfile).
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/admin/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# var/ holds the default SQLite file and collected static files (WhiteNoise warns when STATIC_ROOT is missing).
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve static files (Swagger UI, Plotly.js) from the app itself, collected or not: no CDN, no extra server.
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    # Token first: an unauthenticated request gets 401 with `WWW-Authenticate: Token`, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.core.tokens.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["controlplane.api.permissions.RolePermission"],
    # JSON nested past controlplane.core.bounds.JSON_MAX_DEPTH is a 400; forms as DRF's defaults.
    "DEFAULT_PARSER_CLASSES": [
        "controlplane.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "controlplane.api.pagination.Pagination",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "controlplane.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Mirrorplane API",
    "DESCRIPTION": "Kafka replication with MirrorMaker 2 semantics: clusters, flows, MM2 import/export, audit.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_PERMISSIONS": ["controlplane.api.permissions.ApiDocsPermission"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # INFO tells a story a person can read: Celery's per-task "received" / "succeeded" lines (thousands a
    # minute: every replication slice is a task) go below it; failures ("raised unexpected", "retry")
    # are WARNING/ERROR on the same loggers and stay visible. CELERY_TASK_LOG_LEVEL=INFO brings them back.
    # py4j (the reports worker's Spark gateway) logs a line per closed gateway connection at INFO.
    "loggers": {
        **{
            name: {"level": env.str("CELERY_TASK_LOG_LEVEL", default="WARNING")}
            for name in ("celery.app.trace", "celery.worker.strategy")
        },
        "py4j": {"level": "WARNING"},
    },
}

from controlplane.settings_runtime import *  # noqa: E402,F403
from controlplane.settings_security import *  # noqa: E402,F403
from controlplane.settings_web import *  # noqa: E402,F403
