"""The worker builds a chain's `MirrorSourceTask` with the settings that tune it (`CachedTask.build`), without
a broker: the task's clients connect on first use, and the stored clusters answer nowhere."""

from __future__ import annotations

import pytest

from controlplane.flows import services
from controlplane.status import runtime
from replication.schema_hold import SCHEMA_WAIT_ERROR_S
from replication.task_io import SchemaWait
from tests.replication.states import partition_state
from workers.replication import CachedTask

pytestmark = pytest.mark.django_db


def test_a_workers_task_reports_a_schema_hold_after_the_settings_wait_not_the_default(settings):
    """MIRRORPLANE_SCHEMA_WAIT_ERROR_S reaches the task's schema hold (test_schema_runtime's workers run
    with 5 s; unplugged, they would wait the default 30 s and still pass, only slower)."""
    settings.MIRRORPLANE_SCHEMA_WAIT_ERROR_S = wait_s = 5.0
    assert wait_s < SCHEMA_WAIT_ERROR_S
    source = services.cluster_create(actor=None, alias="A", bootstrap_servers="127.0.0.1:1")
    target = services.cluster_create(actor=None, alias="B", bootstrap_servers="127.0.0.1:2")
    flow = services.flow_create(actor=None, source=source, target=target, enabled=True, topics=["orders"])
    cached = CachedTask.build(runtime.runtime_flow_spec(flow_id=flow.pk), 0)
    try:
        hold = cached.task._hold  # the task's SchemaHold, as its slices use it
        state = partition_state()
        hold.hold(state, 4, SchemaWait(12, "not on the target registry yet (waiting for the schema sync)"))
        since = state.schema_wait_since
        assert hold.check(now=since + wait_s - 0.1) == []
        (error,) = hold.check(now=since + wait_s)
        assert error.partition == ("orders", 0) and "has waited 5s at offset 4" in error.message
    finally:
        cached.close()
