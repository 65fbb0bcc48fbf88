"""Replication-loop detection across flows (pure, no I/O)."""

from __future__ import annotations

import itertools
import time

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


def test_every_looping_flow_is_on_one_reported_loop_the_shortest() -> None:
    aliases = ["A", "B", "C"]
    flows = [flow(f"{s}->{t}", policy=IDENTITY) for s in aliases for t in aliases if s != t]
    paths = sorted(loop.path for loop in detect_replication_loops(flows, aliases=aliases))
    assert paths == ["A->B->A", "A->C->A", "B->C->B"]


def test_identity_flow_with_provenance_loops_through_a_flow_without_it() -> None:
    flows = [
        flow("A->B", policy=IDENTITY, provenance=True),
        flow("B->C", provenance=True),
        flow("C->A"),
    ]
    loops = detect_replication_loops(flows, aliases=["A", "B", "C"])
    assert [loop.path for loop in loops] == ["A->B->C->A"]
    assert loops[0].fix.startswith("enable provenance.header.enabled=true on C->A")


def test_identity_pair_with_provenance_beside_a_default_pair_is_not_a_loop() -> None:
    flows = [flow("A->B", policy=IDENTITY, provenance=True), flow("B->A", policy=IDENTITY, provenance=True)]
    flows += [flow("A->C"), flow("C->A")]
    assert detect_replication_loops(flows, aliases=["A", "B", "C"]) == []


def test_a_loop_needing_a_longer_cycle_than_the_shortest_is_found() -> None:
    flows = [flow("A->B"), flow("B->A"), flow("B->C", provenance=True, separator="_")]
    flows += [flow("C->A", provenance=True, separator="_")]
    loops = detect_replication_loops(flows, aliases=["A", "B", "C"])
    assert [loop.path for loop in loops] == ["A->B->C->A"]


def test_a_component_too_large_to_search_is_reported_on_a_walk() -> None:
    mesh = [f"C{index}" for index in range(12)]
    flows = [flow(f"{s}->{t}", provenance=True) for s in mesh for t in mesh if s != t and t != "C11"]
    flows += [flow("C10->C11"), flow("C11->C0", separator="_", provenance=True)]
    started = time.perf_counter()
    loops = detect_replication_loops(flows, aliases=mesh)
    assert time.perf_counter() - started < 5
    assert [loop.path for loop in loops] == ["C0->C10->C11->C0"]


def test_loop_detection_is_linear_on_a_full_mesh_and_a_long_chain() -> None:
    """Issue 27 item 7: an 11-cluster mesh killed the web worker; a 2,999-flow chain hit RecursionError."""
    started = time.perf_counter()
    chain = [f"N{index}" for index in range(5_000)]
    hops = [flow(f"{s}->{t}") for s, t in itertools.pairwise(chain)]
    assert detect_replication_loops(hops, aliases=chain) == []
    [loop] = detect_replication_loops(
        [*hops, flow(f"{chain[-1]}->{chain[0]}", policy=IDENTITY)], aliases=chain
    )
    assert len(loop.flows) == len(chain)
    mesh = [f"C{index}" for index in range(20)]
    assert (
        detect_replication_loops([flow(f"{s}->{t}") for s in mesh for t in mesh if s != t], aliases=mesh)
        == []
    )
    mixed = [flow(f"{s}->{t}", separator="_" if s == mesh[-1] else ".") for s in mesh for t in mesh if s != t]
    assert len(detect_replication_loops(mixed, aliases=mesh)) == 1
    assert time.perf_counter() - started < 5


def test_reported_loops_are_capped_for_large_meshes() -> None:
    aliases = [f"C{index}" for index in range(8)]
    flows = [flow(f"{s}->{t}", policy=IDENTITY) for s in aliases for t in aliases if s != t]
    assert len(detect_replication_loops(flows, aliases=aliases)) == MAX_REPORTED_LOOPS
