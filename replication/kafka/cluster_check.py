"""Can we reach a cluster, and if not, exactly why: DNS, connection refused, TLS, authentication or timeout.

Two steps, so the reason is precise: first resolve and TCP-connect every bootstrap address (DNS and
refused connections are told apart there), then ask the cluster for metadata through librdkafka with the
cluster's own security settings (TLS and SASL failures surface there, reported by librdkafka's error
callback). The check reports broker count, topic count and the metadata round-trip time.
"""

from __future__ import annotations

import socket
import time

from confluent_kafka import KafkaError, KafkaException

from replication.cluster_ports import ClusterCheck, FailureKind
from replication.config import ClusterConfig
from replication.kafka.clients import make_admin


def _split_address(address: str) -> tuple[str, int]:
    """`host:port`, `[v6]:port` or `PROTOCOL://host:port` -> (host, port); ValueError when malformed."""
    address = address.strip().rpartition("://")[2]
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"'{address}' is not host:port")
    return host, int(port)


def _probe_address(address: str, *, timeout_s: float) -> tuple[FailureKind, str] | None:
    """None when a TCP connection to `address` opens, else why not."""
    try:
        host, port = _split_address(address)
    except ValueError as exc:
        return FailureKind.OTHER, str(exc)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return FailureKind.DNS, f"{address}: cannot resolve host '{host}' ({exc.strerror})"
    failure: tuple[FailureKind, str] = (FailureKind.OTHER, f"{address}: no usable address")
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(timeout_s)
                sock.connect(sockaddr)
            return None
        except ConnectionRefusedError:
            failure = (FailureKind.REFUSED, f"{address}: connection refused (nothing listens on port {port})")
        except TimeoutError:
            failure = (FailureKind.TIMEOUT, f"{address}: no TCP connection within {timeout_s:g}s")
        except OSError as exc:
            failure = (FailureKind.OTHER, f"{address}: {exc.strerror or exc}")
    return failure


_AUTH_CODES = {
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.UNSUPPORTED_SASL_MECHANISM,
    KafkaError.ILLEGAL_SASL_STATE,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
}


def classify_kafka_errors(errors: list[KafkaError], *, timeout_s: float) -> tuple[FailureKind, str]:
    """The most specific failure among librdkafka's reported errors (TLS and auth before timeouts)."""
    for error in errors:
        text = error.str()
        if error.code() == KafkaError._SSL or "SSL" in text:
            return FailureKind.TLS, f"TLS handshake failed: {text}"
        if error.code() in _AUTH_CODES or "SASL" in text or "uthenticat" in text:
            return FailureKind.AUTH, f"authentication failed: {text}"
    for error in errors:
        if error.code() == KafkaError._RESOLVE:
            return FailureKind.DNS, error.str()
    for error in errors:
        if "refused" in error.str().lower():
            return FailureKind.REFUSED, error.str()
    detail = f" (last error: {errors[-1].str()})" if errors else ""
    return FailureKind.TIMEOUT, f"no metadata answer within {timeout_s:g}s{detail}"


def _settings_hint(kind: FailureKind, cluster: ClusterConfig) -> str:
    """What to check, named as the cluster's settings are, for an authentication or TLS failure."""
    client = cluster.client
    if kind is FailureKind.AUTH:
        mechanism = client.get("sasl.mechanism", "GSSAPI")
        user = client.get("sasl.username")
        as_user = f" as user '{user}'" if user else ""
        where = "sasl.jaas.config" if "sasl.jaas.config" in client else "sasl.username / sasl.password"
        return (
            f"cluster {cluster.alias} refused the {mechanism} login{as_user}: check {where} "
            f"(and sasl.mechanism) of cluster {cluster.alias}"
        )
    trust = next(
        (name for name in ("ssl.ca.pem", "ssl.ca.location", "ssl.truststore.location") if name in client),
        "ssl.ca.pem",
    )
    return (
        f"cluster {cluster.alias}: the brokers' certificates are not trusted or the TLS handshake failed: "
        f"check {trust} (the CA that signed the brokers' certificates) and security.protocol of cluster "
        f"{cluster.alias}"
    )


def tcp_unreachable(cluster: ClusterConfig, *, timeout_s: float) -> str | None:
    """Why no bootstrap server of `cluster` accepts a TCP connection, or None when one does: a cheap
    first look (refused ports and unknown hosts answer at once) before a Kafka client waits its timeout."""
    addresses = [address for address in cluster.bootstrap_servers.split(",") if address.strip()]
    failures = []
    for address in addresses:
        failure = _probe_address(address, timeout_s=timeout_s)
        if failure is None:
            return None
        failures.append(failure[1])
    return "; ".join(failures) or "no bootstrap servers"


def check_cluster(cluster: ClusterConfig, *, timeout_s: float = 5.0) -> ClusterCheck:
    """Connect to `cluster` and report what it answers, or the precise reason it does not."""
    addresses = [address for address in cluster.bootstrap_servers.split(",") if address.strip()]
    probes = [_probe_address(address, timeout_s=timeout_s) for address in addresses]
    if not addresses or all(probe is not None for probe in probes):
        failures = [probe for probe in probes if probe is not None]
        kind = failures[0][0] if failures else FailureKind.OTHER
        message = "; ".join(text for _, text in failures) or "no bootstrap servers"
        return ClusterCheck(ok=False, failure=kind, message=message)

    errors: list[KafkaError] = []
    try:
        admin = make_admin(cluster, callbacks={"error_cb": errors.append})
    except (KafkaException, ValueError, TypeError) as exc:
        return ClusterCheck(
            ok=False, failure=FailureKind.OTHER, message=f"invalid client configuration: {exc}"
        )
    started = time.monotonic()
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        admin.poll(0)  # serve the error callbacks queued while the request failed
        if exc.args and isinstance(exc.args[0], KafkaError):
            errors.append(exc.args[0])
        kind, message = classify_kafka_errors(errors, timeout_s=timeout_s)
        if kind in (FailureKind.AUTH, FailureKind.TLS):
            message = f"{_settings_hint(kind, cluster)} ({message})"
        if kind is FailureKind.TIMEOUT and "SSL" in cluster.client.get("security.protocol", "").upper():
            # A plaintext listener may sit silent on a TLS hello; the TCP connection itself worked.
            message += "; the brokers accept connections but did not complete a TLS handshake: check that "
            message += "these listeners speak TLS and that security.protocol matches them"
        return ClusterCheck(ok=False, failure=kind, message=message)
    latency_ms = (time.monotonic() - started) * 1000
    return ClusterCheck(
        ok=True,
        brokers=len(metadata.brokers),
        topic_count=len(metadata.topics),
        latency_ms=round(latency_ms, 1),
        message=f"{len(metadata.brokers)} broker(s), {len(metadata.topics)} topic(s)",
    )


class ClusterProbe:
    """Asks one cluster to describe itself through a client kept between calls (cheap while it answers);
    when it does not, `check_cluster` finds the precise reason (DNS, refused, TLS, authentication, timeout).

    The question names no topic: its answer (the brokers and the controller) is the same size on a
    cluster of 50 partitions and of 50,000. A full metadata request here built a Python object per
    partition of the cluster at every probe (every MIRRORPLANE_CLUSTER_PROBE_INTERVAL_S, per cluster), in
    the metadata worker, beside the alert evaluation and the verifier; `topic_count` is therefore None."""

    def __init__(self, cluster: ClusterConfig, *, timeout_s: float) -> None:
        self.cluster, self.timeout_s = cluster, timeout_s
        self._admin = make_admin(cluster)

    def check(self) -> ClusterCheck:
        started = time.monotonic()
        try:
            described = self._admin.describe_cluster(request_timeout=self.timeout_s).result()
        except KafkaException:
            return check_cluster(self.cluster, timeout_s=self.timeout_s)
        return ClusterCheck(
            ok=True,
            brokers=len(described.nodes),
            latency_ms=round((time.monotonic() - started) * 1000, 1),
        )
