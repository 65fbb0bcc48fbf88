"""Flows: clusters and flows (`services` writes, `selectors` reads and the MM2 export, `mm2` the MM2
import), their lifecycle (`lifecycle`, the only writer of a flow's state), worker pools (`pools`), and the one bridge
between rows and the engine's configs (`engine`), and every cluster read of a web request, behind a
breaker per cluster (`cluster_reads`). Other packages import these modules.

Its tables are in `controlplane.flows.models` (import a model from there)."""

from controlplane.flows import cluster_reads, engine, lifecycle, mm2, pools, selectors, services

__all__ = ["cluster_reads", "engine", "lifecycle", "mm2", "pools", "selectors", "services"]
