"""Status: what the workers report and how it is judged: the workers' gateway (`runtime`: the flows to
run, events, signals; `partition_writes`: the partition rows' write), the live status roll-ups
(`rollup`), a page of a flow's partitions and its per-topic roll-ups (`partitions`), judged against the
RPO budgets (`budgets`), and the control plane's own health (`health`). Other packages import these
modules.

Its tables are in `controlplane.status.models` (import a model from there)."""

from controlplane.status import budgets, health, partition_writes, partitions, rollup, runtime

__all__ = ["budgets", "health", "partition_writes", "partitions", "rollup", "runtime"]
