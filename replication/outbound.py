"""What the server and its workers may fetch on a user's behalf: one policy for every outbound URL (schema
registries, alert webhooks and Slack, the OpenID provider's endpoints), and the one opener that fetches.

- http and https only, and no user or password inside the URL: credentials live in write-only secret
  fields (a URL is shown, audited and exported; a secret field never is);
- the host by the allowlist's rules, the ones broker hosts follow (`HostAllowlist`: names, `*.domain`
  suffixes, IP networks; an empty list allows any name);
- every address the host resolves to, when the URL is stored and again at each connection (so a name
  that moves to another address later gains nothing): an address that is not public (loopback,
  link-local with the cloud metadata address 169.254.169.254, private, shared, reserved, multicast) is
  refused unless a network of the allowlist holds it;
- no redirect followed: a redirect would escape these checks and carry Basic credentials to another
  origin; no proxy from the environment either (the proxy, not this check, would pick the address);
- a remote service's answer is never repeated to a user (it may be another service's error page or a
  server-local file's field): `outcome` names what happened as a class (HTTP 5xx, timed out, refused).
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

# The process environment's allowlist, for the replication runtime (workers, `python -m replication run`);
# the control plane reads the same variable into settings.MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED.
OUTBOUND_HOSTS_VARIABLE = "MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED"
MAX_URL_LENGTH = 2000
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(OSError):
    """The policy refused a URL or the address a connection would reach; the message says why and the fix."""


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if "/" not in entry:
        try:
            return ipaddress.ip_network(entry)  # a bare address: a network of one
        except ValueError:
            return None
    try:
        return ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return None


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    return mapped or address


def is_public(address: Address) -> bool:
    return address.is_global and not address.is_multicast


@dataclass(frozen=True)
class HostAllowlist:
    """Host names, `*.domain` suffixes and IP networks (10.0.0.0/8, or one address), lower case."""

    entries: tuple[str, ...] = ()
    setting: str = OUTBOUND_HOSTS_VARIABLE  # named in messages: what the administrator changes

    @classmethod
    def of(cls, entries: Iterable[str], *, setting: str = OUTBOUND_HOSTS_VARIABLE) -> HostAllowlist:
        return cls(tuple(item.strip().lower() for item in entries if item.strip()), setting)

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> HostAllowlist:
        value = (os.environ if environ is None else environ).get(OUTBOUND_HOSTS_VARIABLE, "")
        return cls.of(value.split(","))

    def allows_host(self, host: str) -> bool:
        """Whether `host` (a name or an address) is one the list names; an empty list allows any."""
        if not self.entries:
            return True
        name = host.strip("[]").lower().rstrip(".")
        address = _address(name)
        for entry in self.entries:
            if entry.startswith("*."):
                if name.endswith(entry[1:]):
                    return True
            elif (network := _network(entry)) is not None:
                if address is not None and address.version == network.version and address in network:
                    return True
            elif name == entry.rstrip("."):
                return True
        return False

    def allows_address(self, address: Address) -> bool:
        """A public address, or one inside a network the list names."""
        if is_public(address):
            return True
        return any(
            network is not None and network.version == address.version and address in network
            for network in map(_network, self.entries)
        )

    def address_problem(self, host: str, address: Address) -> str | None:
        if self.allows_address(address):
            return None
        return (
            f"'{host}' resolves to {address}, a {_kind(address)} address, which {self.setting} does not "
            f"list: outbound requests reach only public addresses and the networks it names (ask the "
            "server's administrator to add that network if the service really lives there)"
        )

    def host_problem(self, host: str) -> str | None:
        if self.allows_host(host):
            return None
        return (
            f"host '{host}' is not one {self.setting} allows ({', '.join(self.entries)}): ask the server's "
            "administrator to add it, or use an allowed host"
        )


def _kind(address: Address) -> str:
    for kind in ("loopback", "link_local", "private", "multicast", "unspecified", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-public"


def resolve(host: str, port: int) -> list[Address]:
    """The addresses `host` resolves to; [] when it does not resolve (now)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [address for info in infos if (address := _address(str(info[4][0]))) is not None]


def url_problem(
    url: object,
    *,
    allowlist: HostAllowlist,
    credentials_fix: str = "put them in the write-only secret fields",
    resolver: Callable[[str, int], list[Address]] = resolve,
) -> str | None:
    """Why the server may not fetch `url`, or None. A name that does not resolve now passes the name
    rules alone: every connection checks the addresses again."""
    if not isinstance(url, str) or not url.strip() or len(url) > MAX_URL_LENGTH:
        return f"must be an http:// or https:// URL of at most {MAX_URL_LENGTH} characters"
    try:
        parts = urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", a port that is not a number
        return f"is not a URL ({exc}): give an http:// or https:// URL"
    if parts.scheme not in ("http", "https"):
        return (
            f"'{parts.scheme or url[:20]}' is not http or https: only http:// and https:// URLs are fetched"
        )
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return (
            f"a user or password inside the URL is refused (URLs are shown and exported): {credentials_fix}"
        )
    if not parts.hostname:
        return "names no host: give an http:// or https:// URL with a host"
    if port == 0:
        return "port 0 cannot be reached: give a port from 1 to 65535"
    if problem := allowlist.host_problem(parts.hostname):
        return problem
    for address in resolver(parts.hostname, port):
        if problem := allowlist.address_problem(parts.hostname, address):
            return problem
    return None


def without_credentials(url: str) -> tuple[str, str | None]:
    """`url` without the user and password inside it, and them as `user:password` (None: it had none);
    for URLs stored before credentials were refused there."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    clean = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return clean, f"{unquote(user or '')}:{unquote(password or '')}"


# -- the opener -------------------------------------------------------------------------------------------
def connector(allowlist: HostAllowlist):
    """`socket.create_connection` that reaches only the addresses `allowlist` allows: the addresses are
    checked as they are connected to, so a name that resolves elsewhere after its URL was checked is not
    followed there (for any HTTP client: urllib's opener below, requests' adapter in the control plane)."""

    def create_connection(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None, **_):
        host, port = address[0], address[1]
        last_error: OSError | None = None
        for resolved in resolve(host, port) or [None]:
            if resolved is None:
                raise OutboundRefused(f"'{host}' does not resolve")
            if problem := allowlist.address_problem(host, resolved):
                last_error = last_error or OutboundRefused(problem)
                continue
            try:
                return socket.create_connection((str(resolved), port), timeout, source_address)
            except OSError as exc:
                last_error = exc
        raise last_error or OutboundRefused(f"'{host}' does not resolve")

    return create_connection


class _Guarded:
    """A connection handler whose connections go through the allowlist's connector."""

    connect: Callable

    def do_open(self, http_class, req, **kwargs):
        def connection(host, **options):
            made = http_class(host, **options)
            made._create_connection = self.connect  # http.client's hook for how the socket is made
            return made

        return super().do_open(connection, req, **kwargs)


class _GuardedHTTPHandler(_Guarded, urllib.request.HTTPHandler):
    pass


class _GuardedHTTPSHandler(_Guarded, urllib.request.HTTPSHandler):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx answer stays an HTTPError: nothing is sent to the new location


def opener(allowlist: HostAllowlist) -> urllib.request.OpenerDirector:
    """An opener of http and https only (no file:, ftp:, data:), through no proxy, following no redirect,
    connecting only where `allowlist` allows."""
    director = urllib.request.OpenerDirector()
    connect = connector(allowlist)
    http_handler, https_handler = _GuardedHTTPHandler(), _GuardedHTTPSHandler()
    http_handler.connect = https_handler.connect = connect
    for handler in (
        urllib.request.ProxyHandler({}),
        urllib.request.UnknownHandler(),
        http_handler,
        https_handler,
        urllib.request.HTTPDefaultErrorHandler(),
        _NoRedirect(),
        urllib.request.HTTPErrorProcessor(),
    ):
        director.add_handler(handler)
    return director


def fetch(request: urllib.request.Request, *, allowlist: HostAllowlist, timeout_s: float) -> bytes:
    """The answer's body (at most 16 MB) of a request the policy allows; `OutboundRefused` when it does
    not, urllib's errors when the service fails (`outcome` describes them)."""
    if problem := url_problem(request.full_url, allowlist=allowlist, resolver=lambda host, port: []):
        raise OutboundRefused(problem)
    with opener(allowlist).open(request, timeout=timeout_s) as response:
        return response.read(16 * 2**20)


def outcome(exc: BaseException) -> str:
    """What happened to a request, as a class the user may see (never the remote service's words)."""
    if isinstance(exc, urllib.error.HTTPError):
        if 300 <= exc.code < 400:
            return f"answered with a redirect (HTTP {exc.code // 100}xx), which is not followed: give the final URL"
        return f"answered HTTP {exc.code // 100}xx"
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, OutboundRefused):
        return f"not contacted: {reason}"
    if isinstance(reason, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(reason, ConnectionRefusedError):
        return "refused the connection"
    if isinstance(reason, socket.gaierror):
        return "does not resolve"
    if isinstance(reason, ssl.SSLError):
        return "failed the TLS handshake (check the certificate)"
    if isinstance(reason, http.client.HTTPException | ValueError):
        return "answered something that is not HTTP or JSON"
    return "could not be reached"
