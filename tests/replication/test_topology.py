"""Replication-loop detection across flows (pure, no I/O)."""

from __future__ import annotations

import pytest

from replication.config import IDENTITY_REPLICATION_POLICY, FlowConfig
from replication.topology import MAX_REPORTED_LOOPS, detect_replication_loops, find_replication_loops

DEFAULT = "DefaultReplicationPolicy"
IDENTITY = IDENTITY_REPLICATION_POLICY


def flow(
    name: str,
    *,
    policy: str = DEFAULT,
    provenance: bool = False,
    enabled: bool = True,
    separator: str = ".",
) -> FlowConfig:
    source, target = name.split("->")
    return FlowConfig(
        source=source,
        target=target,
        enabled=enabled,
        replication_policy_class=policy,
        replication_policy_separator=separator,
        provenance_header_enabled=provenance,
    )


def test_identity_active_active_without_provenance_loops() -> None:
    loops = find_replication_loops(
        [flow("A->B", policy=IDENTITY), flow("B->A", policy=IDENTITY)], aliases=["A", "B"]
    )
    assert loops == [
        "A->B->A: both flows use IdentityReplicationPolicy without provenance.header.enabled, so records "
        "would loop forever; enable provenance.header.enabled=true on A->B, B->A or use DefaultReplicationPolicy"
    ]


@pytest.mark.parametrize(
    "flows",
    [
        pytest.param([flow("A->B"), flow("B->A")], id="default-active-active"),
        pytest.param(
            [flow("A->B", policy=IDENTITY, provenance=True), flow("B->A", policy=IDENTITY, provenance=True)],
            id="identity-with-provenance",
        ),
        pytest.param([flow("A->B", policy=IDENTITY), flow("B->C", policy=IDENTITY)], id="identity-chain"),
        pytest.param(
            [flow("A->B", policy=IDENTITY), flow("B->A", policy=IDENTITY, enabled=False)], id="disabled"
        ),
        pytest.param(
            [flow("A->B", policy=IDENTITY, provenance=True), flow("B->A", provenance=True)],
            id="mixed-with-provenance",
        ),
        pytest.param([flow("A->B", separator="_"), flow("B->A", separator="_")], id="same-custom-separator"),
        pytest.param([flow("A->B"), flow("B->C"), flow("C->A")], id="default-triangle"),
    ],
)
def test_cycles_that_something_stops_are_not_loops(flows: list[FlowConfig]) -> None:
    assert find_replication_loops(flows, aliases=["A", "B", "C"]) == []


def test_mixed_policies_loop_because_identity_hides_the_prefix() -> None:
    loops = detect_replication_loops([flow("A->B"), flow("B->A", policy=IDENTITY)], aliases=["A", "B"])
    assert len(loops) == 1
    assert loops[0].path == "A->B->A"
    assert "B->A uses IdentityReplicationPolicy" in loops[0].reason
    assert "provenance.header.enabled=true on A->B, B->A" in loops[0].fix


def test_different_separators_loop() -> None:
    loops = find_replication_loops([flow("A->B"), flow("B->A", separator="_")], aliases=["A", "B"])
    assert len(loops) == 1
    assert "different replication.policy.separator values ('.' on A->B, '_' on B->A)" in loops[0]


def test_partial_provenance_names_only_the_flows_missing_it() -> None:
    loops = detect_replication_loops(
        [flow("A->B", policy=IDENTITY, provenance=True), flow("B->A", policy=IDENTITY)], aliases=["A", "B"]
    )
    assert len(loops) == 1
    assert loops[0].fix.startswith("enable provenance.header.enabled=true on B->A ")


def test_three_cluster_identity_ring_is_one_loop() -> None:
    flows = [flow("A->B", policy=IDENTITY), flow("B->C", policy=IDENTITY), flow("C->A", policy=IDENTITY)]
    loops = find_replication_loops(flows, aliases=["A", "B", "C"])
    assert len(loops) == 1
    assert loops[0].startswith("A->B->C->A: every flow uses IdentityReplicationPolicy")


def test_every_elementary_cycle_is_reported_once() -> None:
    aliases = ["A", "B", "C"]
    flows = [flow(f"{s}->{t}", policy=IDENTITY) for s in aliases for t in aliases if s != t]
    paths = sorted(loop.path for loop in detect_replication_loops(flows, aliases=aliases))
    # three 2-cycles and the two orientations of the triangle
    assert paths == ["A->B->A", "A->B->C->A", "A->C->A", "A->C->B->A", "B->C->B"]


def test_reported_loops_are_capped_for_large_meshes() -> None:
    aliases = [f"C{index}" for index in range(6)]
    flows = [flow(f"{s}->{t}", policy=IDENTITY) for s in aliases for t in aliases if s != t]
    assert len(detect_replication_loops(flows, aliases=aliases)) == MAX_REPORTED_LOOPS
