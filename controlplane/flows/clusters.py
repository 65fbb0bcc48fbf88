"""The control plane's one way to its clusters: `clusters()` gives the ports of
`replication.cluster_ports` (a page's topic reads, consumer groups and their changes), implemented on
Apache Kafka (`replication.kafka.clusters`) or, with MIRRORPLANE_CLUSTERS=memory, on in-memory clusters
this process holds (`replication.memory.clusters`: tests of the control plane's rules, demos). The only
control-plane module that imports an implementation; a contract in `pyproject.toml` keeps it so.
"""

from __future__ import annotations

from django.conf import settings

from replication.cluster_ports import Clusters
from replication.kafka.clusters import KAFKA
from replication.memory.clusters import MemoryClusters

MEMORY = MemoryClusters()  # the in-memory clusters of this process (seeded by a test or a demo)


def clusters() -> Clusters:
    """The clusters' implementation MIRRORPLANE_CLUSTERS names."""
    return MEMORY if settings.MIRRORPLANE_CLUSTERS == "memory" else KAFKA
