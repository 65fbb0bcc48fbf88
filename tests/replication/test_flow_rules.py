"""The flow rules (`replication.flow_rules`), against MM2's documented behaviour, and the agreement of the
mm2.properties reader with them (pure, no I/O)."""

from __future__ import annotations

import pytest

from replication.config import (
    FLOW_PROPERTIES_BY_NAME,
    ClusterConfig,
    DeliveryGuarantee,
    FlowConfig,
    Mm2Config,
    OffsetSyncsTopicLocation,
)
from replication.flow_rules import FlowProblem, FlowValueError, flow_problems, parse_flow_value, value_problem
from replication.mm2file import Mm2FileError, parse_mm2
from replication.mm2file_writing import write_mm2

ALIASES = ("A", "B")


def prop(name: str):
    return FLOW_PROPERTIES_BY_NAME[name]


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        (
            "topics",
            " orders.* , ,payments ",
            ("orders.*", "payments"),
        ),  # MM2's lists: trimmed, empties dropped
        ("topics", "", ()),
        (
            "topics.exclude",
            r".*[\-\.]internal, .*\.replica, __.*",
            (r".*[\-\.]internal", r".*\.replica", "__.*"),
        ),
        ("enabled", "TRUE", True),
        ("emit.heartbeats.enabled", "False", False),
        ("tasks.max", "+4", 4),
        ("replication.factor", "-1", -1),
        ("offset-syncs.topic.location", "Target", OffsetSyncsTopicLocation.TARGET),
        ("delivery.guarantee", "exactly_once", DeliveryGuarantee.EXACTLY_ONCE),
        ("replication.policy.separator", "_", "_"),
    ],
)
def test_text_is_parsed_to_the_propertys_type(name: str, text: str, value) -> None:
    assert parse_flow_value(prop(name), text) == value


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("enabled", "yes", "'yes' is not a boolean"),
        ("tasks.max", "2.5", "'2.5' is not a whole number"),
        ("offset-syncs.topic.location", "middle", "'middle' is not one of source, target"),
    ],
)
def test_text_of_the_wrong_type_names_the_value(name: str, text: str, reason: str) -> None:
    with pytest.raises(FlowValueError) as caught:
        parse_flow_value(prop(name), text)
    assert caught.value.reason == reason and caught.value.fix


@pytest.mark.parametrize(
    ("name", "value", "reason_part", "fix_part"),
    [
        ("emit.checkpoints.interval.seconds", 0, "0 is out of range", "emit.checkpoints.enabled = false"),
        ("replication.factor", 0, "0 is out of range", "-1 for the broker's default"),
        ("tasks.max", 0, "out of range", "at least 1"),
        ("offset.lag.max", -1, "out of range", "must not be negative"),
        ("topics", ("*.audit",), "'*.audit' is not a valid regular expression", "did you mean '.*\\.audit'"),
        ("topics", ("a,b",), "contains ','", "\\x2C"),
        ("topics", ("",), "an empty pattern", "remove the empty item"),
        ("topics", (" orders",), "leading or trailing whitespace", "remove the whitespace"),
        ("groups.exclude", ("${env:X}",), "config provider placeholder", "remove '${'"),
        ("replication.policy.separator", "", "the separator is empty", "use '.'"),
        ("replication.policy.separator", "_ ", "leading or trailing whitespace", "remove"),
        (
            "replication.policy.class",
            "MyPolicy",
            "unknown replication policy 'MyPolicy'",
            "DefaultReplication",
        ),
        ("tasks.max", True, "not a whole number", "write a number"),
        ("enabled", "true", "not a boolean", "true or false"),
        ("offset-syncs.topic.location", "source", "not one of source, target", "write one of source, target"),
    ],
)
def test_each_rule_gives_the_reason_and_the_fix(name: str, value, reason_part: str, fix_part: str) -> None:
    problem = value_problem(prop(name), value)
    assert problem is not None
    reason, fix = problem
    assert reason_part in reason and fix_part in fix


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("replication.factor", -1),
        ("offset.lag.max", 0),
        ("topics", (r".*[\-\.]internal", r"\Qa.b\E", "(?i)orders")),
        ("replication.policy.class", "IdentityReplicationPolicy"),
        ("replication.policy.separator", "--"),
    ],
)
def test_values_mm2_accepts_pass(name: str, value) -> None:
    assert value_problem(prop(name), value) is None


def test_a_default_flow_breaks_no_rule() -> None:
    assert flow_problems(FlowConfig(source="A", target="B"), aliases=ALIASES) == []


def test_flow_problems_are_typed_with_field_property_value_reason_and_fix() -> None:
    flow = FlowConfig(source="A", target="B_x", tasks_max=0, replication_policy_separator="_")
    problems = flow_problems(flow, aliases=("A", "B_x"))
    assert [(p.field, p.property_name, p.value) for p in problems] == [
        ("tasks_max", "tasks.max", "0"),
        ("replication_policy_separator", "replication.policy.separator", "_"),
    ]
    assert problems[1].message() == (
        "separator '_' occurs in cluster alias 'B_x', so remote topic names could not be read back. Fix: use "
        "a separator that no alias contains, such as '.'"
    )


def test_the_pair_must_be_two_known_clusters() -> None:
    (unknown,) = flow_problems(FlowConfig(source="A", target="C"), aliases=ALIASES)
    assert (unknown.field, unknown.value) == (None, "C")
    (same,) = flow_problems(FlowConfig(source="A", target="A"), aliases=ALIASES)
    assert "replicates a cluster to itself" in same.reason


@pytest.mark.parametrize(
    ("extra", "reason_part", "fix_part"),
    [
        ({"topics": "x"}, "topics is a flow property", "set its own field"),
        ({"topics.blacklist": "x"}, "old name of topics.exclude", "set topics.exclude"),
        ({"producer.acks": "7"}, "producer.acks", "all, -1, 0, 1"),
        ({"status.storage.replication.factor": "3"}, "Kafka Connect worker property", "remove it"),
        ({"producer.linger.ms": " 5"}, "leading or trailing whitespace", "remove"),
        ({"": "5"}, "without a name", "name it"),
    ],
)
def test_flow_scoped_client_overrides_follow_the_client_rules(extra, reason_part: str, fix_part: str) -> None:
    (problem,) = flow_problems(FlowConfig(source="A", target="B", extra=extra), aliases=ALIASES)
    assert problem.field == "extra"
    assert reason_part in problem.reason and fix_part in problem.fix


def test_accepted_overrides_pass() -> None:
    extra = {"producer.linger.ms": "5", "consumer.auto.offset.reset": "earliest", "sync.custom": "x"}
    assert flow_problems(FlowConfig(source="A", target="B", extra=extra), aliases=ALIASES) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"tasks_max": 0},
        {"emit_heartbeats_interval_seconds": 0, "refresh_topics_interval_seconds": -5},
        {"topics": ("[unclosed",), "groups_exclude": ("(?P<x>a)",)},
        {"replication_policy_class": "Custom"},
        {"offset_lag_max": -2, "checkpoints_topic_replication_factor": 0},
        {"replication_policy_separator": "A"},
    ],
)
def test_the_file_reader_refuses_what_the_rules_refuse_with_the_same_reasons(changes) -> None:
    """One home: a flow written as mm2.properties and read back fails with the rules' own reasons."""
    flow = FlowConfig(source="A", target="B", enabled=True, **changes)
    expected = flow_problems(flow, aliases=ALIASES)
    assert expected
    clusters = tuple(ClusterConfig(alias=alias, bootstrap_servers=f"{alias}:9092") for alias in ALIASES)
    with pytest.raises(Mm2FileError) as caught:
        parse_mm2(write_mm2(Mm2Config(clusters=clusters, flows=(flow,))), environ={})
    assert sorted((e.reason, e.fix) for e in caught.value.errors) == sorted(
        (p.reason, p.fix) for p in expected
    )
    assert all(isinstance(p, FlowProblem) for p in expected)
