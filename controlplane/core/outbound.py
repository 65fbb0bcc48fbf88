"""The control plane's side of the outbound-URL policy (`replication.outbound`): its allowlist is
settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED, and a URL it refuses is a 400 naming the field at every write
(create, update, each import) and a clear refusal, never a 500, when a stored URL is used after the list
changed."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail.backends import smtp
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from replication.outbound import HostAllowlist, connector, url_problem

REGISTRY_CREDENTIALS_FIX = (
    "put the user and password in the write-only schema.registry.basic.auth.user.info secret property "
    "(user:password), or a token in schema.registry.bearer.auth.token"
)


def outbound_hosts() -> HostAllowlist:
    return HostAllowlist.of(settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED)


def outbound_url_error(
    url: object, *, credentials_fix: str = "put them in the write-only secret fields"
) -> str | None:
    """Why the server may not fetch `url` for a user (scheme, credentials, host, resolved addresses), or None."""
    return url_problem(url, allowlist=outbound_hosts(), credentials_fix=credentials_fix)


# -- requests' connections under the policy -----------------------------------------------------------------
class _Guarded:
    """A urllib3 connection whose socket goes through the allowlist's connector (`replication.outbound`):
    every address it connects to is checked then, not only when its URL was."""

    def _new_conn(self):
        return connector(outbound_hosts())((self._dns_host, self.port), self.timeout, self.source_address)


class _GuardedHTTPConnection(_Guarded, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_Guarded, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class GuardedAdapter(HTTPAdapter):
    """Mount on a requests session (`session.mount("http://", GuardedAdapter())`, and https) so that its
    connections reach only what MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED allows."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


# -- the email relay under the policy -------------------------------------------------------------------
class _GuardedSMTP(smtplib.SMTP):
    """smtplib's client whose socket goes through the allowlist's connector."""

    def _get_socket(self, host, port, timeout):
        return connector(outbound_hosts())((host, port), timeout, self.source_address)


class _GuardedSMTPSSL(smtplib.SMTP_SSL):
    def _get_socket(self, host, port, timeout):
        connection = connector(outbound_hosts())((host, port), timeout, self.source_address)
        return self.context.wrap_socket(connection, server_hostname=self._host)


class GuardedEmailBackend(smtp.EmailBackend):
    """Django's SMTP backend (the EMAIL_* settings) reaching the relay (EMAIL_HOST) only where
    MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED allows, its addresses checked as they are connected to: a relay on
    this machine or a private network is listed there like any other service the server reaches."""

    @property
    def connection_class(self):
        return _GuardedSMTPSSL if self.use_ssl else _GuardedSMTP
