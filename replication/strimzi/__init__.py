"""Strimzi's `KafkaMirrorMaker2` resource (YAML, `kafka.strimzi.io/v1beta2` or `v1`): read as the
mm2.properties entries it means, and written back (v1beta2) from a configuration.

Reading maps each field to the entries Strimzi's operator gives MM2's connectors and hands them to the
mm2.properties reader (`parse_mm2_entries`), so a resource is judged by exactly the rules a file is; every
problem names the YAML field (`spec.mirrors[0].sourceConnector.config.tasks.max`) and its line.

    spec.clusters[].alias, bootstrapServers         clusters = ..., A.bootstrap.servers
    spec.clusters[].config                          A.<property> (Connect worker properties reported, ignored)
    spec.clusters[].tls                             A.security.protocol = SSL (SASL_SSL with SASL)
      .trustedCertificates[] (Secrets)              A.ssl.ca.pem: the certificates, one after the other
    spec.clusters[].authentication type tls         A.ssl.certificate.pem, A.ssl.key.pem
      type scram-sha-256, scram-sha-512, plain      A.sasl.mechanism, A.sasl.jaas.config (username, password)
      type oauth, custom                            refused, naming the field: no client equivalent here
    spec.mirrors[].sourceCluster, targetCluster     the flow A->B
      sourceConnector                               A->B.enabled: true unless absent, paused or stopped
        .tasksMax                                   A->B.tasks.max
      checkpointConnector, heartbeatConnector       A->B.emit.checkpoints.enabled, emit.heartbeats.enabled:
                                                    false when absent (Strimzi runs only the listed ones)
      sourceConnector/checkpointConnector/
      heartbeatConnector.config                     A->B.<property>; one property given two values is refused
      topicsPattern, topicsExcludePattern           A->B.topics, topics.exclude (over the connectors' config,
      groupsPattern, groupsExcludePattern           A->B.groups, groups.exclude  as Strimzi puts them)

The kafka.strimzi.io/v1 layout (also accepted under v1beta2, never mixed with spec.clusters) has one
target and the source in each mirror; each is read as a cluster above:

    spec.target (alias, bootstrapServers, tls, ...)  the target of every mirror (groupId and the Connect
                                                     topics reported, ignored)
    spec.mirrors[].source (alias, bootstrapServers,  the flow source->target
      tls, authentication, config)

A Kubernetes Secret cannot be read from here: each value taken from one becomes an `${env:SECRET_KEY}`
placeholder (`passwordSecret: {secretName: mm2-user, password: password}` reads `${env:MM2_USER_PASSWORD}`),
which the web import asks for and `python -m replication run` reads from its environment, like any
placeholder of an mm2.properties. Pairs no mirror names emit no heartbeats (`emit.heartbeats.enabled =
false` at the top level), as Strimzi deploys no connector for them. The Connect deployment's own fields
(`replicas`, `resources`, `connectCluster`, ...) are reported and ignored: Mirrorplane's workers are its own.

Writing (`write_strimzi`) gives one `KafkaMirrorMaker2` document per target cluster (Strimzi runs a resource's
connectors on its target's Connect cluster), whose reading gives back the same clusters and flows; secrets
are never written, only references to Secrets the header lists.

Its modules, by what they do: `resource` (the kind, the connectors, the SASL types), `yaml_fields` (the
YAML under its budget as fields with their lines), `entries` (the entries the fields mean, the problems),
`reading` (`parse_strimzi`), `writing` (`write_strimzi`), `either_format` (a text of either format).
"""

from replication.strimzi.either_format import load_mm2_file, missing_placeholders, parse_mirrormaker
from replication.strimzi.reading import parse_strimzi
from replication.strimzi.resource import API_VERSION, KIND, is_strimzi_resource
from replication.strimzi.writing import write_strimzi

__all__ = [
    "API_VERSION",
    "KIND",
    "is_strimzi_resource",
    "load_mm2_file",
    "missing_placeholders",
    "parse_mirrormaker",
    "parse_strimzi",
    "write_strimzi",
]
