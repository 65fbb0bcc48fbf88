"""Topics' sizes on disk, from the one Kafka request that reports them: DescribeLogDirs (Kafka 1.0+), sent
to every broker that holds a replica of the topic (a topic's page), or to every broker for every topic
(one request a broker: the topic list). Each broker answers the bytes of the log segments of each
of its replicas (`PartitionSize`), remote (tiered) storage excluded, so the sizes are per replica:
`TopicSizes.total_bytes` is what the topic costs the cluster's disks (every replica), `leader_bytes` what
one copy of it holds (each partition's leader's log).

confluent-kafka does not expose DescribeLogDirs, so this one request goes through kafka-python's network
layer (`KafkaAdminClient`: its public `describe_log_dirs` drops the response's error code, which says
why a broker refused), with the cluster's librdkafka client properties mapped to kafka-python's
(`kafka_python_config`): PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL with PLAIN or SCRAM, CA and client
certificates as PEM text or files. The whole read (connecting, authenticating, one request per broker)
ends within `timeout_s`.

Nothing here raises anything but `SizesUnread`, whose message says why: a broker that refused (Kafka
answers CLUSTER_AUTHORIZATION_FAILED to a principal without DESCRIBE on the cluster resource), a broker
without the request (the embedded demo broker), a cluster that did not answer in time, settings this
reader cannot map (GSSAPI, OAUTHBEARER, a PKCS#12 keystore).
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import time
from collections.abc import Iterable, Mapping

from kafka import KafkaAdminClient
from kafka import errors as kafka_errors
from kafka.protocol.admin import DescribeLogDirsRequest

from replication.cluster_ports import PartitionSize, ReplicaSize, SizesUnread, TopicSizes
from replication.config import ClusterConfig
from replication.kafka.clients import librdkafka_properties

# kafka-python logs every retry of a connection at ERROR; each failure is this module's SizesUnread, shown
# on the page that asked, so its own log says nothing an operator needs.
logging.getLogger("kafka").setLevel(logging.CRITICAL)

_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _flag_off(properties: Mapping[str, object], name: str) -> bool:
    return str(properties.get(name, "")).strip().lower() in ("false", "0", "none", "")


def _load_client_certificate(context: ssl.SSLContext, properties: Mapping[str, object]) -> None:
    password = str(properties["ssl.key.password"]) if properties.get("ssl.key.password") else None
    certificate, key = properties.get("ssl.certificate.location"), properties.get("ssl.key.location")
    if certificate:
        context.load_cert_chain(str(certificate), str(key) if key else None, password)
        return
    certificate_pem, key_pem = properties.get("ssl.certificate.pem"), properties.get("ssl.key.pem")
    if not certificate_pem:
        return
    # load_cert_chain reads files only: the PEM text lives on disk (a private folder) for this call alone.
    with tempfile.TemporaryDirectory(prefix="mirrorplane-tls-") as folder:
        paths = []
        for name, text in (("certificate.pem", certificate_pem), ("key.pem", key_pem)):
            if not text:
                continue
            path = os.path.join(folder, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as file:
                file.write(str(text))
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1] if len(paths) > 1 else None, password)


def _ssl_context(properties: Mapping[str, object]) -> ssl.SSLContext:
    """The TLS settings librdkafka reads, as one SSLContext: CA (PEM text or file; the system's when
    neither), client certificate, hostname and certificate verification."""
    for name in ("ssl.keystore.location", "ssl.engine.location", "ssl.providers"):
        if properties.get(name):
            raise SizesUnread(f"{name} is not supported by the DescribeLogDirs reader: use PEM settings")
    try:
        context = ssl.create_default_context(
            cafile=str(properties["ssl.ca.location"]) if properties.get("ssl.ca.location") else None,
            cadata=str(properties["ssl.ca.pem"]) if properties.get("ssl.ca.pem") else None,
        )
        _load_client_certificate(context, properties)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise SizesUnread(f"the cluster's TLS settings could not be loaded: {exc}") from exc
    if _flag_off(properties, "ssl.endpoint.identification.algorithm") and (
        "ssl.endpoint.identification.algorithm" in properties
    ):
        context.check_hostname = False
    if "enable.ssl.certificate.verification" in properties and _flag_off(
        properties, "enable.ssl.certificate.verification"
    ):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def kafka_python_config(cluster: ClusterConfig) -> dict[str, object]:
    """kafka-python's settings for the admin client of `cluster`, from the librdkafka properties every
    other client of it uses (`ClusterConfig.client_properties("admin")`, the JAAS line translated)."""
    properties = librdkafka_properties(cluster.client_properties("admin"))
    protocol = str(properties.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _PROTOCOLS:
        raise SizesUnread(f"security.protocol {protocol} is not one of {', '.join(_PROTOCOLS)}")
    config: dict[str, object] = {
        "bootstrap_servers": cluster.bootstrap_servers.split(","),
        "client_id": "mirrorplane-log-dirs",
        "security_protocol": protocol,
    }
    if protocol.startswith("SASL_"):
        mechanism = str(properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "GSSAPI")
        if mechanism.upper() not in _MECHANISMS:
            raise SizesUnread(f"sasl.mechanism {mechanism} is not supported by the DescribeLogDirs reader")
        config |= {
            "sasl_mechanism": mechanism.upper(),
            "sasl_plain_username": properties.get("sasl.username"),
            "sasl_plain_password": properties.get("sasl.password"),
        }
    if protocol.endswith("SSL"):
        config["ssl_context"] = _ssl_context(properties)
    return config


def _error_name(code: int) -> str:
    error = kafka_errors.for_code(code)
    return getattr(error, "message", None) or error.__name__


def _replica_sizes(response, broker: int) -> list[tuple[str, int, ReplicaSize]]:
    """(topic, partition, size) of each current (not future) log in one broker's answer."""
    if code := getattr(response, "error_code", 0):
        raise SizesUnread(f"broker {broker} refused DescribeLogDirs: {_error_name(code)}")
    if not response.results:  # a broker with log dirs lists them all; none is a refusal (before v3)
        raise SizesUnread(f"broker {broker} reported no log dirs (refused DescribeLogDirs)")
    sizes = []
    for log_dir in response.results:
        if log_dir.error_code:
            raise SizesUnread(f"broker {broker} log dir {log_dir.log_dir}: {_error_name(log_dir.error_code)}")
        for described in log_dir.topics:
            for partition in described.partitions:
                if not partition.is_future_key:
                    replica = ReplicaSize(broker, partition.partition_size, partition.offset_lag)
                    sizes.append((described.name, partition.partition_index, replica))
    return sizes


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"no answer in time ({text})" if isinstance(exc, kafka_errors.KafkaTimeoutError) else text


def _request(leaders: Mapping[str, Mapping[int, int]] | None) -> DescribeLogDirsRequest:
    if leaders is None:
        return DescribeLogDirsRequest(topics=None)
    return DescribeLogDirsRequest(
        topics=[
            DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=sorted(partitions))
            for topic, partitions in sorted(leaders.items())
        ]
    )


def _describe_log_dirs(
    cluster: ClusterConfig, request: DescribeLogDirsRequest, brokers: Iterable[int] | None, timeout_s: float
) -> tuple[list[tuple[int, object]], tuple[int, ...]]:
    """(broker, its DescribeLogDirs response) of each of `brokers` (None: every broker) that the cluster's
    metadata lists, asked at once; and those it does not list (offline brokers, not asked)."""
    config = kafka_python_config(cluster)
    deadline = time.monotonic() + timeout_s
    timeout_ms = max(int(timeout_s * 1000), 1)
    admin = None
    try:
        admin = KafkaAdminClient(**config, request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms)
        manager = admin._manager  # the request's error code is what the public method drops
        listed = {node.node_id for node in manager.cluster.brokers()}
        wanted = listed if brokers is None else set(brokers)
        asked = sorted(wanted & listed)

        async def ask_all():
            futures = [manager.send(request, node_id=broker) for broker in asked]
            remaining_ms = max((deadline - time.monotonic()) * 1000, 1)
            return [await manager.wait_for(future, remaining_ms) for future in futures]

        return list(zip(asked, manager.run(ask_all), strict=True)), tuple(sorted(wanted - listed))
    except kafka_errors.UnsupportedVersionError as exc:
        raise SizesUnread(f"the brokers do not implement DescribeLogDirs ({exc})") from exc
    except Exception as exc:  # kafka-python's errors have no common base worth naming: say what it was
        raise SizesUnread(
            f"cluster {cluster.alias} ({cluster.bootstrap_servers}): DescribeLogDirs failed within "
            f"{timeout_s:g}s: {_reason(exc)}"
        ) from exc
    finally:
        if admin is not None:
            admin.close()


def read_topic_sizes(
    cluster: ClusterConfig,
    *,
    leaders: Mapping[str, Mapping[int, int]] | None,
    brokers: Iterable[int] | None,
    timeout_s: float,
) -> dict[str, TopicSizes]:
    """The size of every replica that `brokers` (None: every broker) hold of the topics in `leaders`
    (topic -> partition -> its leader; None: every topic, leaders unknown), by topic, all within
    `timeout_s`. A topic of `leaders` that no broker holds has its partitions, of no replica. A broker of
    `brokers` that the cluster's metadata does not list (offline) is not asked: it is named in each
    topic's `unreported_brokers`, and the sizes are those of the brokers that answered."""
    found: dict[str, dict[int, list[ReplicaSize]]] = {
        topic: {partition: [] for partition in partitions} for topic, partitions in (leaders or {}).items()
    }
    responses, unreported = _describe_log_dirs(cluster, _request(leaders), brokers, timeout_s)
    for broker, response in responses:
        for topic, partition, replica in _replica_sizes(response, broker):
            found.setdefault(topic, {}).setdefault(partition, []).append(replica)
    return {
        topic: TopicSizes(
            topic=topic,
            partitions=tuple(
                PartitionSize(
                    partition=partition,
                    leader=(leaders or {}).get(topic, {}).get(partition, -1),
                    replicas=tuple(sorted(replicas, key=lambda r: r.broker)),
                )
                for partition, replicas in sorted(partitions.items())
            ),
            unreported_brokers=unreported,
        )
        for topic, partitions in sorted(found.items())
    }
