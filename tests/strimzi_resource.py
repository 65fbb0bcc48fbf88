"""A Strimzi KafkaMirrorMaker2 resource as operators write it, shared by the parser and import tests."""

# What a mirror copies and how, the same in both layouts.
_MIRROR = """\
    sourceConnector:
      tasksMax: 4
      config:
        replication.factor: 3
        sync.topic.acls.enabled: "false"
        replication.policy.separator: "_"
        producer.compression.type: zstd
    checkpointConnector:
      config:
        sync.group.offsets.enabled: true
        emit.checkpoints.interval.seconds: 20
        replication.policy.separator: "_"
    topicsPattern: "orders.*, payments"
    groupsPattern: ".*"
    groupsExcludePattern: "test-.*"
"""

# Strimzi's TLS example with SCRAM on the source, as operators write it.
RESOURCE = (
    """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  version: 4.0.0
  replicas: 1
  connectCluster: "cluster-b" # Must be the target cluster
  clusters:
  - alias: "cluster-a"
    bootstrapServers: cluster-a-kafka-bootstrap:9093
    tls:
      trustedCertificates:
      - secretName: cluster-a-cluster-ca-cert
        pattern: "*.crt"
    authentication:
      type: scram-sha-512
      username: mm2-user
      passwordSecret:
        secretName: mm2-user
        password: password
  - alias: "cluster-b"
    bootstrapServers: cluster-b-kafka-bootstrap:9093
    tls:
      trustedCertificates:
      - secretName: cluster-b-cluster-ca-cert
        certificate: ca.crt
    config:
      config.storage.replication.factor: -1
      consumer.fetch.max.bytes: 1048576
  mirrors:
  - sourceCluster: "cluster-a"
    targetCluster: "cluster-b"
"""
    + _MIRROR
)
SECRETS = {
    "MM2_USER_PASSWORD": 'p"w',
    "CLUSTER_A_CLUSTER_CA_CERT_CRT": "-----BEGIN CERTIFICATE-----A",
    "CLUSTER_B_CLUSTER_CA_CERT_CA_CRT": "-----BEGIN CERTIFICATE-----B",
}

# The same mirror in the kafka.strimzi.io/v1 layout: one target, the source in the mirror.
V1_RESOURCE = (
    """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  version: 4.1.0
  replicas: 1
  target:
    alias: "cluster-b"
    bootstrapServers: cluster-b-kafka-bootstrap:9093
    groupId: my-mirror-maker-2-group
    configStorageTopic: my-mirror-maker-2-config
    statusStorageTopic: my-mirror-maker-2-status
    offsetStorageTopic: my-mirror-maker-2-offsets
    tls:
      trustedCertificates:
      - secretName: cluster-b-cluster-ca-cert
        certificate: ca.crt
    config:
      config.storage.replication.factor: -1
      consumer.fetch.max.bytes: 1048576
  mirrors:
  - source:
      alias: "cluster-a"
      bootstrapServers: cluster-a-kafka-bootstrap:9093
      tls:
        trustedCertificates:
        - secretName: cluster-a-cluster-ca-cert
          pattern: "*.crt"
      authentication:
        type: scram-sha-512
        username: mm2-user
        passwordSecret:
          secretName: mm2-user
          password: password
"""
    + _MIRROR
)
