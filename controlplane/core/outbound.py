"""The control plane's side of the outbound-URL policy (`replication.outbound`): its allowlist is
settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED, and a URL it refuses is a 400 naming the field at every write
(create, update, each import) and a clear refusal, never a 500, when a stored URL is used after the list
changed."""

from __future__ import annotations

from django.conf import settings

from replication.outbound import HostAllowlist, url_problem

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
