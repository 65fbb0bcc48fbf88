"""Replication policies, lineage, cycles, provenance header and per-topic decisions (pure, no I/O)."""

from __future__ import annotations

import pytest

from replication.config import (
    DEFAULT_REPLICATION_POLICY,
    IDENTITY_REPLICATION_POLICY,
    FlowConfig,
    OffsetSyncsTopicLocation,
)
from replication.filters import TopicFilter
from replication.policy import (
    PROVENANCE_HEADER,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    classify_topic,
    has_visited,
    is_cycle,
    provenance_after_hop,
    provenance_path,
    replication_hops,
    replication_policy_for,
    returns_through,
    topic_lineage,
)

ALIASES = ("A", "B", "C")


@pytest.fixture
def default() -> DefaultReplicationPolicy:
    return DefaultReplicationPolicy(known_aliases=ALIASES)


@pytest.fixture
def identity() -> IdentityReplicationPolicy:
    return IdentityReplicationPolicy(known_aliases=ALIASES)


@pytest.mark.parametrize(
    ("topic", "source", "upstream", "original"),
    [
        ("orders", None, None, "orders"),
        ("orders.v1", None, None, "orders.v1"),  # MM2 would read cluster 'orders' here
        ("A.orders", "A", "orders", "orders"),
        ("A.orders.v1", "A", "orders.v1", "orders.v1"),
        ("B.A.orders", "B", "A.orders", "orders"),
        ("C.B.A.orders", "C", "B.A.orders", "orders"),
        ("A.", None, None, "A."),
        ("D.orders", None, None, "D.orders"),
    ],
)
def test_default_policy_reads_only_known_aliases_as_sources(
    default: DefaultReplicationPolicy, topic: str, source: str | None, upstream: str | None, original: str
) -> None:
    assert default.topic_source(topic) == source
    assert default.upstream_topic(topic) == upstream
    assert default.original_topic(topic) == original


def test_default_policy_formats_remote_topics_with_the_separator() -> None:
    policy = DefaultReplicationPolicy(separator="_", known_aliases=["A", "B"])
    assert policy.format_remote_topic("A", "orders.v1") == "A_orders.v1"
    assert policy.topic_source("A_orders.v1") == "A"
    assert policy.upstream_topic("B_A_orders") == "A_orders"
    assert policy.topic_source("A.orders") is None


def test_default_policy_prefers_the_longest_matching_alias() -> None:
    policy = DefaultReplicationPolicy(separator="-", known_aliases=["us", "us-east"])
    assert policy.topic_source("us-east-orders") == "us-east"
    assert policy.upstream_topic("us-east-orders") == "orders"


def test_empty_separator_is_rejected() -> None:
    with pytest.raises(ValueError, match="separator"):
        DefaultReplicationPolicy(separator="", known_aliases=["A"])


@pytest.mark.parametrize(
    ("topic", "remote_from_a", "source"),
    [
        ("orders", "orders", None),
        ("A.orders", "A.orders", None),  # the name says nothing under identity naming
        ("heartbeats", "A.heartbeats", None),
        ("B.heartbeats", "A.B.heartbeats", "B"),
    ],
)
def test_identity_policy_keeps_names_but_prefixes_heartbeats(
    identity: IdentityReplicationPolicy, topic: str, remote_from_a: str, source: str | None
) -> None:
    assert identity.format_remote_topic("A", topic) == remote_from_a
    assert identity.topic_source(topic) == source


def test_identity_policy_original_topic(identity: IdentityReplicationPolicy) -> None:
    assert identity.original_topic("orders") == "orders"
    assert identity.original_topic("B.A.heartbeats") == "heartbeats"
    assert identity.is_heartbeats_topic("A.heartbeats")


@pytest.mark.parametrize("policy_class", [DefaultReplicationPolicy, IdentityReplicationPolicy])
def test_internal_topic_names(policy_class) -> None:
    policy = policy_class(known_aliases=ALIASES)
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.is_checkpoints_topic("A.checkpoints.internal")
    assert not policy.is_checkpoints_topic("A.checkpoints")
    assert policy.is_mm2_internal_topic("mm2-offset-syncs.B.internal")
    assert policy.is_mm2_internal_topic("mm2-configs.A.internal")
    assert policy.is_mm2_internal_topic("A.checkpoints.internal")
    assert not policy.is_mm2_internal_topic("orders")
    assert policy.is_heartbeats_topic("heartbeats")
    assert policy.is_heartbeats_topic("A.heartbeats")
    assert not policy.is_heartbeats_topic("heartbeats-archive")


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        ("__transaction_state", True),
        (".hidden", True),
        ("connect-offsets.internal", True),
        ("app-internal", True),
        ("mm2-offset-syncs.B.internal", True),
        ("A.checkpoints.internal", True),
        ("orders", False),
        ("heartbeats", False),
        ("A.heartbeats", False),
        ("internal-orders", False),
    ],
)
def test_internal_topics(default: DefaultReplicationPolicy, topic: str, internal: bool) -> None:
    assert default.is_internal_topic(topic) is internal


def test_separator_is_used_in_internal_topic_names() -> None:
    policy = DefaultReplicationPolicy(separator="_", known_aliases=["A"])
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert policy.checkpoints_topic("A") == "A_checkpoints_internal"
    assert policy.is_internal_topic("A_checkpoints_internal")


@pytest.mark.parametrize("policy_class", [DEFAULT_REPLICATION_POLICY, IDENTITY_REPLICATION_POLICY])
def test_internal_topic_separator_can_be_turned_off_like_mm2(policy_class: str) -> None:
    """`replication.policy.internal.topic.separator.enabled = false`: internal topics keep '.' (MM2 2.x
    names) while remote topics use the custom separator."""
    flow = FlowConfig(
        source="A",
        target="B",
        replication_policy_class=policy_class,
        replication_policy_separator="_",
        replication_policy_internal_topic_separator_enabled=False,
    )
    policy = replication_policy_for(flow, known_aliases=["A", "B"])
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.is_checkpoints_topic("A.checkpoints.internal")
    assert not policy.is_checkpoints_topic("A_checkpoints_internal")
    assert policy.is_internal_topic("mm2-offset-syncs.B.internal")
    assert policy.format_remote_topic("A", "heartbeats") == "A_heartbeats"
    enabled = replication_policy_for(
        flow.replace(replication_policy_internal_topic_separator_enabled=True), known_aliases=["A", "B"]
    )
    assert enabled.checkpoints_topic("A") == "A_checkpoints_internal"


@pytest.mark.parametrize(
    ("topic", "lineage"),
    [
        ("orders", []),
        ("orders.v1", []),
        ("A.orders", ["A"]),
        ("B.A.orders", ["B", "A"]),
        ("A.B.A.x", ["A", "B"]),
    ],
)
def test_topic_lineage(default: DefaultReplicationPolicy, topic: str, lineage: list[str]) -> None:
    assert topic_lineage(default, topic) == lineage


def test_replication_hops(default: DefaultReplicationPolicy) -> None:
    assert replication_hops(default, "A.orders", "A") == 1
    assert replication_hops(default, "B.A.orders", "A") == 2
    assert replication_hops(default, "B.A.orders", "B") == 1
    assert replication_hops(default, "B.A.orders", "C") == -1
    assert replication_hops(default, "orders", "A") == -1


@pytest.mark.parametrize(
    ("topic", "target", "cycle"),
    [
        ("A.orders", "A", True),
        ("A.orders", "B", False),
        ("B.A.orders", "A", True),
        ("B.A.orders", "C", False),
        ("orders", "A", False),
        ("orders.v1", "orders", False),
    ],
)
def test_is_cycle_default(default: DefaultReplicationPolicy, topic: str, target: str, cycle: bool) -> None:
    assert is_cycle(default, topic, target_alias=target) is cycle


def test_identity_cycles_only_visible_on_heartbeats(identity: IdentityReplicationPolicy) -> None:
    assert not is_cycle(identity, "orders", target_alias="A")
    assert not is_cycle(identity, "A.orders", target_alias="A")
    assert is_cycle(identity, "A.heartbeats", target_alias="A")
    assert topic_lineage(identity, "orders") == []


@pytest.mark.parametrize(
    ("class_name", "expected"),
    [
        (DEFAULT_REPLICATION_POLICY, DefaultReplicationPolicy),
        ("DefaultReplicationPolicy", DefaultReplicationPolicy),
        (IDENTITY_REPLICATION_POLICY, IdentityReplicationPolicy),
        ("IdentityReplicationPolicy", IdentityReplicationPolicy),
    ],
)
def test_replication_policy_for_accepts_mm2_and_short_names(class_name: str, expected: type) -> None:
    flow = FlowConfig(
        source="A", target="B", replication_policy_class=class_name, replication_policy_separator="_"
    )
    policy = replication_policy_for(flow, known_aliases=["A", "B"])
    assert type(policy) is expected
    assert policy.separator == "_"


def test_replication_policy_for_rejects_unknown_classes() -> None:
    flow = FlowConfig(source="A", target="B", replication_policy_class="com.example.MyPolicy")
    with pytest.raises(ValueError) as caught:
        replication_policy_for(flow, known_aliases=["A", "B"])
    message = str(caught.value)
    assert "replication.policy.class" in message
    assert "com.example.MyPolicy" in message
    assert "IdentityReplicationPolicy" in message and "DefaultReplicationPolicy" in message


def test_provenance_after_hop_appends_and_keeps_other_headers_in_order() -> None:
    headers = [("trace", b"1"), (PROVENANCE_HEADER, b"A"), ("empty", None), ("trace", b"2")]
    after = provenance_after_hop(headers, source_alias="B")
    assert after == [("trace", b"1"), (PROVENANCE_HEADER, b"A,B"), ("empty", None), ("trace", b"2")]
    assert headers[1] == (PROVENANCE_HEADER, b"A")  # input untouched


@pytest.mark.parametrize("headers", [None, []])
def test_provenance_after_hop_without_headers(headers) -> None:
    assert provenance_after_hop(headers, source_alias="A") == [(PROVENANCE_HEADER, b"A")]


def test_provenance_after_hop_merges_duplicate_provenance_headers() -> None:
    headers = [(PROVENANCE_HEADER, b"A"), ("k", b"v"), (PROVENANCE_HEADER, b"X")]
    assert provenance_after_hop(headers, source_alias="B") == [(PROVENANCE_HEADER, b"A,B"), ("k", b"v")]


def test_has_visited() -> None:
    headers = provenance_after_hop(provenance_after_hop(None, source_alias="A"), source_alias="B")
    assert provenance_path(headers) == ["A", "B"]
    assert has_visited(headers, cluster_alias="A")
    assert has_visited(headers, cluster_alias="B")
    assert not has_visited(headers, cluster_alias="C")
    assert not has_visited([("other", b"A")], cluster_alias="A")
    assert not has_visited(None, cluster_alias="A")
    assert not has_visited([(PROVENANCE_HEADER, None)], cluster_alias="A")


def _decide(topic: str, flow: FlowConfig):
    policy = replication_policy_for(flow, known_aliases=ALIASES)
    return classify_topic(topic=topic, flow=flow, policy=policy, topic_filter=TopicFilter.for_flow(flow))


@pytest.mark.parametrize(
    ("topic", "replicate", "reason", "remote"),
    [
        ("orders", True, None, "B.orders"),
        ("orders.v1", True, None, "B.orders.v1"),
        ("C.orders", True, None, "B.C.orders"),
        ("A.orders", False, "cycle", None),
        ("C.A.orders", False, "cycle", None),
        ("__consumer_offsets", False, "internal", None),
        ("B.checkpoints.internal", False, "internal", None),
        ("mm2-offset-syncs.A.internal", False, "internal", None),
        ("orders.replica", False, "filter", None),
        ("heartbeats", True, None, "B.heartbeats"),
        ("C.heartbeats", True, None, "B.C.heartbeats"),
        ("A.heartbeats", False, "cycle", None),
    ],
)
def test_classify_topic_default_policy(
    topic: str, replicate: bool, reason: str | None, remote: str | None
) -> None:
    decision = _decide(topic, FlowConfig(source="B", target="A", enabled=True))
    assert (decision.topic, decision.replicate, decision.reason, decision.remote_topic) == (
        topic,
        replicate,
        reason,
        remote,
    )
    assert (decision.detail is None) is replicate


def test_classify_topic_orders_internal_then_cycle_then_filter() -> None:
    flow = FlowConfig(source="B", target="A", topics=("nothing",), topics_exclude=(".*",))
    assert _decide("A.x.internal", flow).reason == "internal"
    assert _decide("A.orders", flow).reason == "cycle"
    filtered = _decide("orders", flow)
    assert filtered.reason == "filter"
    assert filtered.detail == "matches topics.exclude pattern '.*'"


def test_classify_topic_cycle_detail_names_the_path() -> None:
    decision = _decide("C.A.orders", FlowConfig(source="B", target="A"))
    assert "A->C->B" in decision.detail
    assert "A" in decision.detail


def test_heartbeats_bypass_the_topic_filter_like_mm2() -> None:
    flow = FlowConfig(source="B", target="A", topics=("orders",))
    assert _decide("heartbeats", flow).replicate
    assert _decide("payments", flow).detail == "matches no topics pattern"


def test_heartbeats_follow_the_topic_filter_when_heartbeats_replication_is_off() -> None:
    """MM2's `heartbeats.replication.enabled = false`: heartbeats topics are replicated only when the topic
    filter selects them."""
    only_orders = FlowConfig(source="B", target="A", topics=("orders",), heartbeats_replication_enabled=False)
    assert _decide("heartbeats", only_orders).detail == "matches no topics pattern"
    assert not _decide("C.heartbeats", only_orders).replicate
    everything = only_orders.replace(topics=(".*",))
    assert _decide("heartbeats", everything).remote_topic == "B.heartbeats"


def test_classify_topic_identity_policy_keeps_names() -> None:
    flow = FlowConfig(source="B", target="A", replication_policy_class=IDENTITY_REPLICATION_POLICY)
    assert _decide("orders", flow).remote_topic == "orders"
    assert _decide("heartbeats", flow).remote_topic == "B.heartbeats"
    assert _decide("A.heartbeats", flow).reason == "cycle"


@pytest.mark.parametrize(
    ("location", "topic", "legacy"),
    [
        # MM2's MirrorSourceConfig.offsetSyncsTopic(): named after the cluster the topic does not live on.
        (OffsetSyncsTopicLocation.SOURCE, "mm2-offset-syncs.C.internal", None),
        (OffsetSyncsTopicLocation.TARGET, "mm2-offset-syncs.A.internal", "mm2-offset-syncs.C.internal"),
    ],
)
def test_the_offset_syncs_topic_is_named_after_the_cluster_it_does_not_live_on(
    default: DefaultReplicationPolicy, location, topic: str, legacy: str | None
) -> None:
    flow = FlowConfig(source="A", target="C", offset_syncs_topic_location=location)
    assert default.flow_offset_syncs_topic(flow) == topic
    assert default.legacy_flow_offset_syncs_topic(flow) == legacy


def test_fan_in_flows_with_syncs_on_the_target_have_a_topic_each(default: DefaultReplicationPolicy) -> None:
    a_to_c, b_to_c = (
        FlowConfig(source=source, target="C", offset_syncs_topic_location=OffsetSyncsTopicLocation.TARGET)
        for source in ("A", "B")
    )
    assert default.flow_offset_syncs_topic(a_to_c) != default.flow_offset_syncs_topic(b_to_c)


def test_a_copy_named_after_the_targets_other_alias_returns_through_it():
    policy = replication_policy_for(
        FlowConfig(source="DC1", target="DC2"), known_aliases=("DC1", "DC2", "dc2")
    )
    assert returns_through(policy, "dc2.inventory", target_aliases={"dc2"}) == "dc2"
    assert returns_through(policy, "dc2.DC1.inventory", target_aliases={"DC1"}) == "DC1"
    assert returns_through(policy, "inventory", target_aliases={"dc2"}) is None
    assert not is_cycle(policy, "dc2.inventory", target_alias="DC2")  # what aliases alone cannot see
