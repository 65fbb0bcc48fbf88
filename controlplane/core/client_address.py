"""The address of the client behind a request, one rule for login throttling (django-axes calls
`client_address` through AXES_CLIENT_IP_CALLABLE) and the audit log (`ClientAddressMiddleware` keeps it for
the request, `audit_record` stores it).

With no trusted proxy (TRUSTED_PROXY_COUNT=0) it is the connection's address, whatever X-Forwarded-For
says: anyone can write that header. Behind TRUSTED_PROXY_COUNT proxies, each appending the address it saw
(nginx's `$proxy_add_x_forwarded_for`, every cloud load balancer), the client is that many entries from
the right of X-Forwarded-For; what the client wrote into the header itself sits further left and is never
read. A request with fewer entries than trusted proxies did not come through them: its connection's
address counts."""

from __future__ import annotations

import contextvars
import ipaddress

from django.conf import settings

_current: contextvars.ContextVar[str] = contextvars.ContextVar("client_address", default="")


def client_address(request) -> str:
    remote = request.META.get("REMOTE_ADDR", "") or ""
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    if len(hops) < count:
        return remote
    try:
        return str(ipaddress.ip_address(hops[-count]))
    except ValueError:  # a proxy that appends something else: the connection's address, not the text
        return remote


def current_client_address() -> str:
    """The client address of the request being served ("" outside one: a worker, the command line)."""
    return _current.get()


class ClientAddressMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        token = _current.set(client_address(request))
        try:
            return self.get_response(request)
        finally:
            _current.reset(token)
