"""Status: what the workers report and how it is judged: the workers' gateway (`runtime`: the flows to
run, partition status, events, signals), the live status roll-ups (`rollup`) and the control plane's
own health (`health`). Other packages import these modules."""

from controlplane.status import health, rollup, runtime

__all__ = ["health", "rollup", "runtime"]
