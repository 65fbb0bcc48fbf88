from replication.config import ClusterConfig
from replication.kafka.clients import librdkafka_properties

JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="s3cr\\"et";'
)


def test_jaas_line_becomes_librdkafka_username_and_password():
    cluster = ClusterConfig(
        alias="B",
        bootstrap_servers="b:9092",
        client={"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS},
    )
    properties = librdkafka_properties(cluster.client_properties("producer"))
    assert properties["sasl.username"] == "mirror"
    assert properties["sasl.password"] == 's3cr"et'
    assert "sasl.jaas.config" not in properties
    assert properties["sasl.mechanism"] == "SCRAM-SHA-512"


def test_explicit_librdkafka_credentials_win_over_the_jaas_line():
    properties = librdkafka_properties({"sasl.jaas.config": JAAS, "sasl.username": "explicit"})
    assert properties["sasl.username"] == "explicit"


def test_java_empty_hostname_verification_maps_to_librdkafka_none():
    properties = librdkafka_properties({"ssl.endpoint.identification.algorithm": ""})
    assert properties["ssl.endpoint.identification.algorithm"] == "none"


def test_https_hostname_verification_is_kept():
    properties = librdkafka_properties({"ssl.endpoint.identification.algorithm": "https"})
    assert properties["ssl.endpoint.identification.algorithm"] == "https"
