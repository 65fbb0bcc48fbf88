"""Reading, writing and describing mm2.properties (pure, no Kafka)."""

from __future__ import annotations

import logging
import textwrap

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from replication.config import (
    DEFAULT_TOPICS_EXCLUDE,
    FLOW_PROPERTIES,
    ClusterConfig,
    DataLossPolicy,
    DeliveryGuarantee,
    FlowConfig,
    Mm2Config,
    OffsetSyncsTopicLocation,
)
from replication.mm2file import Mm2FileError, Placeholders, parse_mm2
from replication.mm2file_writing import describe_config, write_mm2
from replication.properties import PropertiesSyntaxError, read_properties
from replication.strimzi import load_mm2_file
from replication.topology import detect_replication_loops


def parse(text: str, **environ: str):
    return parse_mm2(textwrap.dedent(text), environ=environ)


def errors_of(text: str, **environ: str) -> tuple[Mm2FileError, ...]:
    with pytest.raises(Mm2FileError) as caught:
        parse(text, **environ)
    return caught.value.errors


TWO_CLUSTERS = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
"""

ACTIVE_ACTIVE = """\
# Two regions replicating into each other, as MM2 users write it.
clusters = us-east, eu_west
us-east.bootstrap.servers = us1:9093,us2:9093
eu_west.bootstrap.servers = eu1:9093

# shared security for every cluster
security.protocol = SASL_SSL
sasl.mechanism = PLAIN
us-east.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="${env:US_USER}" password="${env:US_PASSWORD}";
eu_west.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="${env:EU_USER:-mirror}" password="${env:EU_PASSWORD}";
eu_west.ssl.truststore.location = /etc/kafka/eu.jks
us-east.producer.linger.ms = 20
eu_west.consumer.fetch.min.bytes = 1024
us-east.admin.request.timeout.ms = 5000

us-east->eu_west.enabled = true
eu_west->us-east.enabled = true

# defaults for both flows (deprecated names still work)
topics = orders.*, payments
topics.blacklist = .*[\\\\-\\\\.]internal, __.*
groups.blacklist = console-consumer-.*
replication.factor = 3
sync.group.offsets.enabled = true
emit.checkpoints.interval.seconds = 10

# flow-scoped overrides
eu_west->us-east.topics = payments
us-east->eu_west.tasks.max = 4
us-east->eu_west.delivery.guarantee = exactly_once
us-east->eu_west.producer.compression.type = lz4
"""
ACTIVE_ACTIVE_ENV = {"US_USER": "us", "US_PASSWORD": "us-secret", "EU_PASSWORD": "eu-secret"}


def test_realistic_active_active_file() -> None:
    parsed = parse(ACTIVE_ACTIVE, **ACTIVE_ACTIVE_ENV)
    config = parsed.config
    assert config.aliases == ("us-east", "eu_west")
    us, eu = config.clusters
    assert us.bootstrap_servers == "us1:9093,us2:9093"
    assert us.client["security.protocol"] == "SASL_SSL"
    assert eu.client["sasl.mechanism"] == "PLAIN"
    assert us.client["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="us" password="us-secret";'
    )
    assert 'username="mirror" password="eu-secret"' in eu.client["sasl.jaas.config"]
    assert eu.client["ssl.truststore.location"] == "/etc/kafka/eu.jks"
    assert dict(us.producer) == {"linger.ms": "20"}
    assert dict(eu.consumer) == {"fetch.min.bytes": "1024"}
    assert dict(us.admin) == {"request.timeout.ms": "5000"}
    assert us.client_properties("producer")["linger.ms"] == "20"

    us_to_eu, eu_to_us = config.flows
    assert (us_to_eu.name, eu_to_us.name) == ("us-east->eu_west", "eu_west->us-east")
    assert us_to_eu.enabled and eu_to_us.enabled
    assert us_to_eu.topics == ("orders.*", "payments")
    assert eu_to_us.topics == ("payments",)
    for flow in config.flows:
        assert flow.topics_exclude == (r".*[\-\.]internal", "__.*")
        assert flow.groups_exclude == ("console-consumer-.*",)
        assert flow.replication_factor == 3
        assert flow.sync_group_offsets_enabled is True
        assert flow.emit_checkpoints_interval_seconds == 10
        assert flow.groups == (".*",)  # MM2 default untouched
    assert us_to_eu.tasks_max == 4 and eu_to_us.tasks_max == 1
    assert us_to_eu.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert dict(us_to_eu.extra) == {"producer.compression.type": "lz4"}
    assert any("topics.blacklist is deprecated; use topics.exclude" in w for w in parsed.warnings)
    assert any("groups.blacklist is deprecated; use groups.exclude" in w for w in parsed.warnings)
    assert any(w.startswith("mm2.properties line ") for w in parsed.warnings)


def test_realistic_file_round_trips() -> None:
    config = parse(ACTIVE_ACTIVE, **ACTIVE_ACTIVE_ENV).config
    for include_defaults in (False, True):
        assert parse_mm2(write_mm2(config, include_defaults=include_defaults), environ={}).config == config


def test_describe_masks_secrets_and_lists_effective_settings() -> None:
    text = describe_config(parse(ACTIVE_ACTIVE, **ACTIVE_ACTIVE_ENV).config)
    assert "us-secret" not in text and "eu-secret" not in text
    assert "sasl.jaas.config = ******" in text
    assert "us-east: bootstrap.servers = us1:9093,us2:9093" in text
    assert "us-east->eu_west: enabled" in text
    assert "Flows (2, 2 enabled)" in text
    for prop in FLOW_PROPERTIES:
        if prop.name != "enabled":
            assert f"    {prop.name} " in text
    width = max(len(prop.name) for prop in FLOW_PROPERTIES)
    assert f"{'tasks.max':<{width}} = 4\n" in text
    assert f"{'offset.lag.max':<{width}} = 100  (default)" in text
    assert "producer.compression.type = lz4" in text


# -- Java .properties syntax -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        ("a=b", "a", "b"),
        ("a = b", "a", "b"),
        ("a:b", "a", "b"),
        ("a b", "a", "b"),
        ("a    :   b c ", "a", "b c "),
        ("a==b", "a", "=b"),
        ("  a=b", "a", "b"),
        ("a=", "a", ""),
        ("a", "a", ""),
        (r"a\ b\:c\=d = v", "a b:c=d", "v"),
        (r"a = x\\y\tz\u0041", "a", "x\\y\tzA"),
        (r"a = .*[\-\.]internal", "a", ".*[-.]internal"),
        (r"a = .*[\\-\\.]internal", "a", r".*[\-\.]internal"),
    ],
)
def test_properties_key_value_syntax(line: str, key: str, value: str) -> None:
    (entry,) = read_properties(line)
    assert (entry.key, entry.value, entry.line) == (key, value, 1)


def test_properties_comments_blank_lines_and_continuations() -> None:
    text = "# comment\n! also comment \\\n\n  a = one, \\\n      two, \\\n  three\nb = trailing\\\\\nc = 3\n"
    entries = read_properties(text)
    assert [(e.key, e.value, e.line) for e in entries] == [
        ("a", "one, two, three", 4),
        ("b", "trailing\\", 7),
        ("c", "3", 8),
    ]


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(PropertiesSyntaxError) as caught:
        read_properties("a = 1\nb = \\u12G4\n")
    assert [(problem.line, problem.key) for problem in caught.value.problems] == [(2, "b")]
    (error,) = errors_of("clusters = A\nA.bootstrap.servers = a\nb = \\u12G4\n")
    assert error.line == 3 and "malformed \\uxxxx escape" in str(error) and "four hexadecimal" in error.fix


@pytest.mark.parametrize("terminator", ["\n", "\r\n", "\r"])
def test_only_java_line_terminators_end_a_line(terminator: str) -> None:
    """A form feed or a vertical tab is not a line end in Java (Python's splitlines says it is)."""
    text = terminator.join(["a = x\fy", "b\x0b= 1", "c = 2\x85z"]) + terminator
    assert [(e.key, e.value, e.line) for e in read_properties(text)] == [
        ("a", "x\fy", 1),
        ("b\x0b", "1", 2),
        ("c", "2\x85z", 3),
    ]


# -- errors: line, property, reason, fix ------------------------------------------------------------------
def test_glob_exclude_fails_with_line_property_pattern_and_reason() -> None:
    (error,) = errors_of(TWO_CLUSTERS + "A->B.enabled = true\nA->B.topics.exclude = *.internal,__.*\n")
    assert error.line == 5
    assert error.property_name == "A->B.topics.exclude"
    assert str(error) == (
        "mm2.properties line 5: A->B.topics.exclude: '*.internal' is not a valid regular expression: nothing "
        "to repeat at position 0. Fix: a leading '*' repeats nothing; did you mean '.*\\.internal'?"
    )


@pytest.mark.parametrize(
    ("extra", "line", "property_name", "reason_part", "fix_part"),
    [
        ("A->B.tasks.max = many", 4, "A->B.tasks.max", "'many' is not a whole number", "write a number"),
        ("A->B.tasks.max = 0", 4, "A->B.tasks.max", "0 is out of range", "at least 1"),
        ("A->B.offset.lag.max = -5", 4, "A->B.offset.lag.max", "out of range", "must not be negative"),
        ("A->B.replication.factor = 0", 4, "A->B.replication.factor", "out of range", "-1 for the broker"),
        (
            "A->B.emit.checkpoints.interval.seconds = 0",
            4,
            "A->B.emit.checkpoints.interval.seconds",
            "out of range",
            "emit.checkpoints.enabled = false",
        ),
        ("A->B.enabled = yes", 4, "A->B.enabled", "'yes' is not a boolean", "true or false"),
        (
            "A->B.offset-syncs.topic.location = middle",
            4,
            "A->B.offset-syncs.topic.location",
            "not one of source, target",
            "source, target",
        ),
        (
            "delivery.guarantee = twice",
            4,
            "delivery.guarantee",
            "not one of at_least_once, exactly_once",
            "exactly_once",
        ),
        (
            "A->B.replication.policy.class = com.example.Custom",
            4,
            "A->B.replication.policy.class",
            "unknown replication policy 'com.example.Custom'",
            "IdentityReplicationPolicy",
        ),
        (
            "A->C.enabled = true",
            4,
            "A->C.enabled",
            "'C', which is not in clusters",
            "add C to clusters = A, B",
        ),
        ("B->B.enabled = true", 4, "B->B.enabled", "replicates a cluster to itself", "two different aliases"),
        ("A->B = true", 4, "A->B", "needs a name after the flow", "A->B.enabled"),
        ("C.bootstrap.servers = c:9092", 4, "C.bootstrap.servers", "'C' is not in clusters", "add C"),
        ("A.topics = x", 4, "A.topics", "cannot be scoped to one cluster", "A->TARGET.topics"),
        ("enabled = true", 4, "enabled", "only makes sense for one flow", "A->B.enabled"),
        ("A.sasl.password = ${env:MISSING_VAR}", 4, "A.sasl.password", "MISSING_VAR is not set", "export"),
        ("A.sasl.password = ${file:/x:y}", 4, "A.sasl.password", "config provider 'file'", "${env:VAR}"),
        ("A.sasl.password = ${env:1bad}", 4, "A.sasl.password", "not an environment variable name", "NAME"),
    ],
)
def test_each_error_names_line_property_reason_and_fix(
    extra: str, line: int, property_name: str, reason_part: str, fix_part: str
) -> None:
    errors = errors_of(TWO_CLUSTERS + extra + "\n")
    error = next(e for e in errors if e.property_name == property_name)
    assert error.line == line
    assert reason_part in error.reason
    assert fix_part in error.fix
    assert str(error).startswith(f"mm2.properties line {line}: {property_name}: ")
    assert f". Fix: {error.fix}" in str(error)


def test_separator_must_not_occur_in_an_alias() -> None:
    text = "clusters = A, B_x\nA.bootstrap.servers = a\nB_x.bootstrap.servers = b\nA->B_x.replication.policy.separator = _\n"
    (error,) = errors_of(text)
    assert (error.line, error.property_name) == (4, "A->B_x.replication.policy.separator")
    assert "separator '_' occurs in cluster alias 'B_x'" in error.reason
    assert "no alias contains" in error.fix


@pytest.mark.parametrize(
    ("clusters_line", "reason_part"),
    [
        ("clusters = A, B.x", "'B.x' is not a valid cluster alias"),
        ("clusters = A, B->C", "'B->C' is not a valid cluster alias"),
        ("clusters = A, A", "listed twice"),
        ("clusters = ,", "no cluster alias given"),
    ],
)
def test_alias_rules(clusters_line: str, reason_part: str) -> None:
    errors = errors_of(clusters_line + "\nA.bootstrap.servers = a\n")
    assert any(reason_part in e.reason and e.line == 1 and e.property_name == "clusters" for e in errors)


def test_missing_clusters_and_bootstrap_servers() -> None:
    (error,) = errors_of("A.bootstrap.servers = a\n")
    assert (error.property_name, error.line, error.reason) == ("clusters", None, "missing")
    assert str(error).startswith("mm2.properties: clusters: missing. Fix: ")
    (error,) = errors_of("clusters = A, B\nA.bootstrap.servers = a\n")
    assert (error.property_name, error.line) == ("B.bootstrap.servers", 1)
    assert "add B.bootstrap.servers" in error.fix


def test_all_errors_of_a_file_are_reported_together() -> None:
    text = TWO_CLUSTERS + "A->B.tasks.max = x\nA->B.topics = [a\nA->B.enabled = maybe\n"
    with pytest.raises(Mm2FileError) as caught:
        parse(text)
    error = caught.value
    assert [e.line for e in error.errors] == [4, 5, 6]
    message = str(error)
    assert message.startswith("mm2.properties: 3 errors:\n")
    assert "line 5: A->B.topics: '[a' is not a valid regular expression" in message
    assert (error.line, error.property_name) == (4, "A->B.tasks.max")


def test_identity_active_active_without_provenance_is_rejected_as_a_loop() -> None:
    text = TWO_CLUSTERS + textwrap.dedent(
        """\
        replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
        A->B.enabled = true
        B->A.enabled = true
        """
    )
    (error,) = errors_of(text)
    assert error.line == 5
    assert error.property_name == "A->B.enabled"
    assert "replication loop A->B->A" in error.reason
    assert "provenance.header.enabled=true" in error.fix
    enabled = text + "provenance.header.enabled = true\n"
    assert len(parse(enabled).config.enabled_flows()) == 2


# -- semantics ------------------------------------------------------------------------------------------
def test_flows_exist_for_every_mentioned_pair_in_first_mention_order() -> None:
    config = parse(TWO_CLUSTERS + "B->A.topics = x\nA->B.enabled = true\n").config
    assert [(f.name, f.enabled) for f in config.flows] == [("B->A", False), ("A->B", True)]
    assert config.enabled_flows() == (config.flows[1],)


def test_defaults_are_mm2_defaults() -> None:
    flow = parse(TWO_CLUSTERS + "A->B.enabled = true\n").config.flows[0]
    assert flow == FlowConfig(source="A", target="B", enabled=True)
    assert flow.topics_exclude == DEFAULT_TOPICS_EXCLUDE


def test_heartbeats_replication_and_internal_separator_settings_are_read() -> None:
    config = parse(
        TWO_CLUSTERS
        + "heartbeats.replication.enabled = false\nreplication.policy.separator = _\n"
        + "A->B.replication.policy.internal.topic.separator.enabled = FALSE\nA->B.enabled = true\n"
    ).config
    (flow,) = config.flows
    assert (
        flow.heartbeats_replication_enabled,
        flow.replication_policy_internal_topic_separator_enabled,
    ) == (
        False,
        False,
    )
    assert parse_mm2(write_mm2(config)).config == config


def test_flow_scoped_setting_wins_over_top_level_whatever_the_order() -> None:
    config = parse(TWO_CLUSTERS + "A->B.tasks.max = 3\ntasks.max = 2\nB->A.enabled = true\n").config
    assert {f.name: f.tasks_max for f in config.flows} == {"A->B": 3, "B->A": 2}


def test_current_name_wins_over_deprecated_alias() -> None:
    parsed = parse(TWO_CLUSTERS + "A->B.topics.exclude = a\nA->B.topics.blacklist = b\nA->B.enabled = true\n")
    assert parsed.config.flows[0].topics_exclude == ("a",)
    assert any(
        "A->B.topics.blacklist is deprecated and ignored: A->B.topics.exclude" in w for w in parsed.warnings
    )
    parsed = parse(TWO_CLUSTERS + "config.properties.blacklist = x.*\nA->B.enabled = true\n")
    assert parsed.config.flows[0].config_properties_exclude == ("x.*",)
    assert any("use config.properties.exclude" in w for w in parsed.warnings)


def test_values_are_case_insensitive_where_mm2_is() -> None:
    flow = parse(
        TWO_CLUSTERS
        + "A->B.enabled = TRUE\nA->B.offset-syncs.topic.location = Target\ndata.loss.policy = SKIP\n"
    ).config.flows[0]
    assert flow.enabled is True
    assert flow.offset_syncs_topic_location is OffsetSyncsTopicLocation.TARGET
    assert flow.data_loss_policy is DataLossPolicy.SKIP


def test_cluster_specific_client_property_wins_over_top_level() -> None:
    config = parse(TWO_CLUSTERS + "security.protocol = SSL\nB.security.protocol = PLAINTEXT\n").config
    assert config.cluster("A").client["security.protocol"] == "SSL"
    assert config.cluster("B").client["security.protocol"] == "PLAINTEXT"


def test_placeholder_default_and_environment() -> None:
    config = parse(
        TWO_CLUSTERS + "A.sasl.username = ${env:USER_A:-fallback}\nB.sasl.username = ${env:USER_B}\n",
        USER_B="b",
    )
    assert config.config.cluster("A").client["sasl.username"] == "fallback"
    assert config.config.cluster("B").client["sasl.username"] == "b"
    # Kafka's config.providers settings are accepted: env placeholders always resolve here.
    parse(TWO_CLUSTERS + "config.providers = env\nconfig.providers.env.class = x.EnvVarConfigProvider\n")


def test_unknown_properties_are_kept_or_ignored_with_a_warning() -> None:
    parsed = parse(TWO_CLUSTERS + "A->B.topic = x\nA->B.consumer.max.poll.records = 5\nfoo.bar = 1\n")
    flow = parsed.config.flows[0]
    assert dict(flow.extra) == {"topic": "x", "consumer.max.poll.records": "5"}
    assert any(
        "A->B.topic: not a property Mirrorplane uses (did you mean topics?)" in w for w in parsed.warnings
    )
    assert any("line 6: foo.bar: not a property Mirrorplane uses; ignored" in w for w in parsed.warnings)
    assert not any("max.poll.records" in w for w in parsed.warnings)


def test_duplicate_keys_last_wins_with_a_warning() -> None:
    parsed = parse(TWO_CLUSTERS + "A->B.tasks.max = 2\nA->B.tasks.max = 5\n")
    assert parsed.config.flows[0].tasks_max == 5
    assert any("line 5: A->B.tasks.max is set again (first on line 4)" in w for w in parsed.warnings)


def test_no_enabled_flow_is_a_warning() -> None:
    assert any("no flow is enabled" in w for w in parse(TWO_CLUSTERS).warnings)


def test_load_mm2_file_logs_warnings(tmp_path, caplog) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(TWO_CLUSTERS + "A->B.enabled = true\ntopics.blacklist = x\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="replication.strimzi"):
        config = load_mm2_file(path)
    assert config.flows[0].topics_exclude == ("x",)
    assert f"{path} line 5: topics.blacklist is deprecated" in caplog.text


def test_writer_rejects_patterns_mm2_lists_cannot_hold() -> None:
    config = Mm2Config(
        clusters=(ClusterConfig("A", "a"), ClusterConfig("B", "b")),
        flows=(FlowConfig(source="A", target="B", topics=("a{1,2}",)),),
    )
    with pytest.raises(ValueError, match="A->B.topics"):
        write_mm2(config)


# -- round trip (property-based) ------------------------------------------------------------------------
_ALIASES = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=6)
_VALUE = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters="$"), max_size=12
).map(str.strip) | st.sampled_from(["a b", "x=y:z#!", "\\back\\slash\\", "tab\tand\nnewline", "é ü"])
_PATTERNS = st.lists(
    st.sampled_from(
        [".*", "orders", r"a\.b", r".*[\-\.]internal", "__.*", "[a-z]+", r"\Qx.y\E", "(?i)pay.*"]
    ),
    max_size=3,
).map(tuple)
_CLIENT_KEYS = st.sampled_from(["sasl.jaas.config", "ssl.key.password", "x"])
_ROLE_KEYS = st.sampled_from(["linger.ms", "fetch.min.bytes", "request.timeout.ms"])
# Enumerated client properties take one of their values (any other is an error when read).
_ENUMERATED = st.lists(
    st.sampled_from(
        [("security.protocol", "SASL_SSL"), ("security.protocol", "plaintext"), ("sasl.mechanism", "PLAIN")]
    ),
    max_size=2,
).map(dict)
_ROLE_ENUMERATED = st.lists(st.sampled_from([("acks", "all"), ("acks", "1")]), max_size=1).map(dict)


@st.composite
def _clusters(draw) -> tuple[ClusterConfig, ...]:
    aliases = draw(st.lists(_ALIASES, min_size=2, max_size=4, unique=True))
    return tuple(
        ClusterConfig(
            alias=alias,
            bootstrap_servers=draw(st.sampled_from(["h:9092", "h1:9092,h2:9092"])),
            client=draw(st.dictionaries(_CLIENT_KEYS, _VALUE, max_size=3)) | draw(_ENUMERATED),
            producer=draw(st.dictionaries(_ROLE_KEYS, _VALUE, max_size=2)) | draw(_ROLE_ENUMERATED),
            consumer=draw(st.dictionaries(_ROLE_KEYS, _VALUE, max_size=2)),
            admin=draw(st.dictionaries(_ROLE_KEYS, _VALUE, max_size=2)),
        )
        for alias in aliases
    )


_FLOW_VALUES = {
    "enabled": st.booleans(),
    "topics": _PATTERNS,
    "topics_exclude": _PATTERNS,
    "groups_exclude": _PATTERNS,
    "config_properties_exclude": _PATTERNS,
    "replication_policy_class": st.sampled_from(
        ["DefaultReplicationPolicy", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"]
    ),
    "replication_policy_separator": st.sampled_from([".", "::"]),
    "replication_factor": st.sampled_from([-1, 1, 3]),
    "tasks_max": st.integers(1, 64),
    "offset_lag_max": st.integers(0, 10_000),
    "emit_heartbeats_interval_seconds": st.integers(1, 100),
    "sync_group_offsets_enabled": st.booleans(),
    "offset_syncs_topic_location": st.sampled_from(list(OffsetSyncsTopicLocation)),
    "delivery_guarantee": st.sampled_from(list(DeliveryGuarantee)),
    "provenance_header_enabled": st.booleans(),
    "data_loss_policy": st.sampled_from(list(DataLossPolicy)),
    "extra": st.dictionaries(
        st.sampled_from(["producer.linger.ms", "consumer.x", "custom.prop"]), _VALUE, max_size=2
    ),
}


@st.composite
def _configs(draw) -> Mm2Config:
    clusters = draw(_clusters())
    aliases = [cluster.alias for cluster in clusters]
    pairs = draw(
        st.lists(st.tuples(st.sampled_from(aliases), st.sampled_from(aliases)), max_size=5, unique=True).map(
            lambda items: [(s, t) for s, t in items if s != t]
        )
    )
    flows = []
    for source, target in pairs:
        changes = draw(st.fixed_dictionaries({}, optional=_FLOW_VALUES))
        flows.append(FlowConfig(source=source, target=target, **changes))
    return Mm2Config(clusters=clusters, flows=tuple(flows))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=_configs(), include_defaults=st.booleans())
def test_writing_then_reading_gives_the_same_config(config: Mm2Config, include_defaults: bool) -> None:
    assume(not detect_replication_loops(config.flows, aliases=config.aliases))
    text = write_mm2(config, include_defaults=include_defaults)
    assert parse_mm2(text, environ={}).config == config


# -- client properties: enumerated values, Connect worker properties -----------------------------------------
def test_invalid_security_protocol_names_the_property_and_the_allowed_values() -> None:
    errors = errors_of(
        """\
        clusters = A, B
        A.bootstrap.servers = a:9092
        B.bootstrap.servers = b:9092
        A.security.protocol = abc
        sasl.mechanism = plain
        B.producer.acks = most
        A->B.enabled = true
        A->B.consumer.isolation.level = read_everything
        """
    )
    assert [(e.line, e.property_name) for e in errors] == [
        (4, "A.security.protocol"),
        (5, "sasl.mechanism"),
        (6, "B.producer.acks"),
        (8, "A->B.consumer.isolation.level"),
    ]
    assert str(errors[0]) == (
        "mm2.properties line 4: A.security.protocol: 'abc' is not a valid security.protocol. "
        "Fix: set security.protocol to one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
    )
    assert "PLAIN, SCRAM-SHA-256" in errors[1].fix and "exactly as written" in errors[1].fix


def test_enumerated_client_values_accept_what_java_clients_accept() -> None:
    parsed = parse(
        """\
        clusters = A, B
        A.bootstrap.servers = a:9092
        B.bootstrap.servers = b:9092
        security.protocol = sasl_ssl
        A.sasl.mechanism = SCRAM-SHA-512
        A.producer.acks = all
        A.producer.compression.type = ZSTD
        A.consumer.auto.offset.reset = none
        B.ssl.endpoint.identification.algorithm =
        A->B.enabled = true
        """
    )
    assert parsed.config.cluster("A").client["security.protocol"] == "sasl_ssl"


def test_connect_worker_properties_are_accepted_reported_and_never_client_properties() -> None:
    parsed = parse(
        """\
        clusters = A, B
        A.bootstrap.servers = a:9092
        B.bootstrap.servers = b:9092
        B.status.storage.replication.factor = 1
        B.config.storage.replication.factor = 1
        B.offset.storage.replication.factor = 1
        A.key.converter = org.apache.kafka.connect.converters.ByteArrayConverter
        offset.flush.timeout.ms = 10000
        forwarding.admin.class = org.example.ForwardingAdmin
        A->B.enabled = true
        A->B.group.id = mm2
        A->B.producer.acks = 1
        """
    )
    cluster_b, cluster_a = parsed.config.cluster("B"), parsed.config.cluster("A")
    assert dict(cluster_b.client) == {} and dict(cluster_a.client) == {}
    assert dict(parsed.config.flows[0].extra) == {"producer.acks": "1"}
    not_applicable = [w for w in parsed.warnings if "not applicable" in w]
    assert len(not_applicable) == 7
    assert (
        "mm2.properties line 4: B.status.storage.replication.factor: a Kafka Connect worker property, not "
        "applicable (Mirrorplane runs no Connect workers); ignored"
    ) in not_applicable
    assert any("forwarding.admin.class: an MM2 connector setting" in w for w in not_applicable)


def test_worker_properties_never_reach_a_client_whatever_built_the_config() -> None:
    cluster = ClusterConfig(
        alias="A",
        bootstrap_servers="a:9092",
        client={"status.storage.replication.factor": "1", "security.protocol": "SSL"},
        consumer={"group.id": "g"},
    )
    assert cluster.client_properties("consumer") == {
        "bootstrap.servers": "a:9092",
        "security.protocol": "SSL",
        "group.id": "g",
    }


def test_placeholders_mark_the_properties_they_fill_and_errors_quote_the_placeholder_not_the_value():
    text = (
        "clusters = A, B\nA.bootstrap.servers = ${env:HOSTS}\nB.bootstrap.servers = b:1\n"
        "A.client.id = ${env:ID}\nA.producer.linger.ms = 5\nsasl.password = ${env:PW}\n"
        "B.sasl.password = own\nA->B.enabled = true\nA->B.tasks.max = ${env:TASKS}\n"
    )
    environ = {"HOSTS": "a:1", "ID": "id-value", "PW": "pw-value", "TASKS": "2"}
    parsed = parse_mm2(text, environ=environ)  # MM2's way: anywhere, from the environment
    assert parsed.config.cluster("A").bootstrap_servers == "a:1" and parsed.config.flows[0].tasks_max == 2
    assert parsed.placeholder_properties == {
        "A": {("client", "client.id"), ("client", "sasl.password")},
        "B": frozenset(),  # B sets its own sasl.password
    }
    (error,) = errors_of("clusters = A\nA.bootstrap.servers = a:1\nA.acks = ${env:ACKS}\n", ACKS="leaked")
    assert error.reason == "'${env:ACKS}' is not a valid acks" and "leaked" not in str(error)

    with pytest.raises(Mm2FileError) as caught:
        parse_mm2(text, environ=environ, placeholders=Placeholders(secrets_only=True))
    assert {(e.property_name, "stored and shown in clear" in e.reason) for e in caught.value.errors} == {
        ("A.bootstrap.servers", True),
        ("A->B.tasks.max", True),
    }
