"""Pure MirrorSourceConnector decisions (task assignment, topic sync plan) and the Scheduler: no broker."""

from __future__ import annotations

from replication.config import FlowConfig
from replication.connector import (
    ConfigSyncAction,
    TopicDescription,
    TopicSelection,
    assign_partitions,
    clamp_replication_factor,
    config_resets,
    config_sync_preview,
    mirrored_topics,
    plan_topic_sync,
    replicated_configs,
    replicated_partitions,
)
from replication.filters import ConfigPropertyFilter, TopicFilter
from replication.policy import replication_policy_for
from replication.scheduler import PeriodicJob, Scheduler

FLOW = FlowConfig(source="A", target="B", enabled=True)


def _plan(
    source_topics, target_topics, *, flow=FLOW, broker_count=3, sync_configs=True, previous_configs=None
):
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    mirrored = mirrored_topics(
        source_topics, flow=flow, policy=policy, topic_filter=TopicFilter.for_flow(flow)
    )
    return plan_topic_sync(
        mirrored=mirrored,
        source_topics=source_topics,
        target_topics=target_topics,
        flow=flow,
        config_filter=ConfigPropertyFilter.for_flow(flow),
        target_broker_count=broker_count,
        sync_configs=sync_configs,
        previous_configs=previous_configs,
    )


def _topics(*descriptions: TopicDescription) -> dict[str, TopicDescription]:
    return {d.name: d for d in descriptions}


# --- assign_partitions -------------------------------------------------------------------------------


def test_tasks_are_capped_by_partition_count():
    assert assign_partitions([("t", 0), ("t", 1)], 5) == [[("t", 0)], [("t", 1)]]


def test_round_robin_over_sorted_partitions_whatever_the_input_order():
    partitions = [("b", 1), ("a", 1), ("b", 0), ("a", 0), ("a", 2)]
    expected = [[("a", 0), ("a", 2), ("b", 1)], [("a", 1), ("b", 0)]]
    assert assign_partitions(partitions, 2) == expected
    assert assign_partitions(list(reversed(partitions)), 2) == expected


def test_every_partition_assigned_exactly_once():
    partitions = [(f"t{t}", p) for t in range(3) for p in range(7)]
    tasks = assign_partitions(partitions, 4)
    assert len(tasks) == 4
    assert sorted(tp for task in tasks for tp in task) == sorted(partitions)
    assert max(map(len, tasks)) - min(map(len, tasks)) <= 1


def test_no_partitions_means_no_tasks():
    assert assign_partitions([], 3) == []


# --- plan_topic_sync ---------------------------------------------------------------------------------


def test_new_remote_topic_gets_partitions_and_filtered_configs():
    source = _topics(
        TopicDescription("orders", 6, {"retention.ms": "1000", "min.insync.replicas": "2"}),
    )
    plan = _plan(source, {})
    assert [(t.name, t.source_topic, t.partitions) for t in plan.create] == [("A.orders", "orders", 6)]
    # min.insync.replicas is in MM2's default config.properties.exclude
    assert dict(plan.create[0].configs) == {"retention.ms": "1000"}
    assert plan.grow == () and plan.update_configs == ()


def test_excluded_and_internal_topics_are_not_planned():
    source = _topics(
        TopicDescription("orders", 1),
        TopicDescription("__consumer_offsets", 50),
        TopicDescription("orders-internal", 1),
        TopicDescription("mm2-offset-syncs.B.internal", 1),
    )
    plan = _plan(source, {})
    assert [t.name for t in plan.create] == ["A.orders"]
    assert [d.topic for d in plan.mirrored] == ["orders"]


def test_topics_include_list_and_identity_policy_names():
    flow = FLOW.replace(
        topics=("pay.*",),
        replication_policy_class="org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
    )
    plan = _plan(_topics(TopicDescription("payments", 2), TopicDescription("orders", 2)), {}, flow=flow)
    assert [t.name for t in plan.create] == ["payments"]


def test_replication_factor_clamped_to_target_brokers_with_a_warning():
    plan = _plan(_topics(TopicDescription("orders", 1)), {}, broker_count=1)
    assert plan.create[0].replication_factor == 1
    assert len(plan.warnings) == 1 and "replication.factor=2" in plan.warnings[0]
    assert clamp_replication_factor(requested=2, broker_count=3) == (2, None)


def test_no_warning_when_nothing_is_created():
    plan = _plan(
        _topics(TopicDescription("orders", 1)), _topics(TopicDescription("A.orders", 1)), broker_count=1
    )
    assert plan.create == () and plan.warnings == ()


def test_partition_growth_planned_never_shrink():
    source = _topics(TopicDescription("orders", 8), TopicDescription("small", 2))
    target = _topics(TopicDescription("A.orders", 4), TopicDescription("A.small", 5))
    plan = _plan(source, target)
    assert [(g.topic, g.current, g.desired) for g in plan.grow] == [("A.orders", 4, 8)]


def test_config_sync_sets_only_changed_source_properties_and_keeps_target_overrides():
    source = _topics(TopicDescription("orders", 1, {"retention.ms": "2000", "cleanup.policy": "delete"}))
    target = _topics(
        TopicDescription(
            "A.orders", 1, {"retention.ms": "1000", "cleanup.policy": "delete", "segment.ms": "7"}
        )
    )
    plan = _plan(source, target)
    assert len(plan.update_configs) == 1
    update = plan.update_configs[0]
    assert update.topic == "A.orders" and dict(update.changes) == {"retention.ms": "2000"}
    assert "segment.ms" not in update.changes  # target-side override untouched, never deleted


def test_config_sync_ignores_excluded_properties_and_can_be_skipped():
    source = _topics(TopicDescription("orders", 1, {"min.insync.replicas": "3", "retention.ms": "5"}))
    target = _topics(TopicDescription("A.orders", 1, {"min.insync.replicas": "1"}))
    assert dict(_plan(source, target).update_configs[0].changes) == {"retention.ms": "5"}
    assert _plan(source, target, sync_configs=False).update_configs == ()


def test_in_sync_topic_needs_nothing():
    source = _topics(TopicDescription("orders", 3, {"retention.ms": "5"}))
    target = _topics(TopicDescription("A.orders", 3, {"retention.ms": "5", "segment.ms": "9"}))
    plan = _plan(source, target)
    assert (plan.create, plan.grow, plan.update_configs) == ((), (), ())


def _preview(source: TopicDescription, target: TopicDescription | None, flow=FLOW):
    selection = TopicSelection.of(flow, replication_policy_for(flow, known_aliases=("A", "B")))
    return {
        row.name: (row.source, row.target, row.action)
        for row in config_sync_preview(
            decision=selection.decide(source.name),
            source=source,
            target=target,
            flow=flow,
            config_filter=ConfigPropertyFilter.for_flow(flow),
        )
    }


def test_config_sync_preview_names_what_the_sync_sets_excludes_and_keeps():
    source = TopicDescription(
        "orders", 1, {"retention.ms": "2000", "min.insync.replicas": "2", "cleanup.policy": "delete"}
    )
    target = TopicDescription(
        "A.orders", 1, {"retention.ms": "1000", "cleanup.policy": "delete", "segment.ms": "7"}
    )
    assert _preview(source, target) == {
        "cleanup.policy": ("delete", "delete", ConfigSyncAction.SAME),
        "min.insync.replicas": ("2", None, ConfigSyncAction.EXCLUDED),
        "retention.ms": ("2000", "1000", ConfigSyncAction.SET),
        "segment.ms": (None, "7", ConfigSyncAction.TARGET_ONLY),
    }
    unexcluded = FlowConfig(source="A", target="B", enabled=True, config_properties_exclude=())
    assert _preview(source, target, unexcluded)["min.insync.replicas"] == ("2", None, ConfigSyncAction.SET)


def test_config_sync_preview_of_a_copy_not_created_yet():
    source = TopicDescription("orders", 1, {"retention.ms": "2000", "min.insync.replicas": "2"})
    assert _preview(source, None) == {
        "min.insync.replicas": ("2", None, ConfigSyncAction.EXCLUDED),
        "retention.ms": ("2000", None, ConfigSyncAction.CREATE),
    }


def test_replicated_partitions_only_where_the_remote_partition_exists():
    source = _topics(TopicDescription("orders", 4), TopicDescription("new", 2), TopicDescription("__x", 1))
    plan = _plan(source, _topics(TopicDescription("A.orders", 2)))
    remote = {"A.orders": 2}  # growth failed; A.new not created yet
    assert replicated_partitions(plan, source_topics=source, remote_partitions=remote) == [
        ("orders", 0),
        ("orders", 1),
    ]
    remote = {"A.orders": 4, "A.new": 2}
    assert len(replicated_partitions(plan, source_topics=source, remote_partitions=remote)) == 6


# --- Scheduler ---------------------------------------------------------------------------------------


def test_scheduler_runs_every_enabled_job_first_then_per_interval():
    scheduler = Scheduler(
        [PeriodicJob("fast", 1.0), PeriodicJob("slow", 10.0), PeriodicJob("off", 1.0, False)]
    )
    assert scheduler.due(now=100.0) == ("fast", "slow")
    assert scheduler.due(now=100.5) == ()
    assert scheduler.due(now=101.0) == ("fast",)
    assert scheduler.due(now=110.0) == ("fast", "slow")
    assert "off" not in scheduler.due(now=1000.0)


def test_scheduler_interval_counts_from_the_last_run():
    scheduler = Scheduler([PeriodicJob("job", 5.0)])
    scheduler.due(now=0.0)
    assert scheduler.due(now=4.9) == ()
    assert scheduler.due(now=7.0) == ("job",)
    assert scheduler.due(now=11.0) == ()
    assert scheduler.due(now=12.0) == ("job",)


# --- config resets (MM2's incremental config sync deletes a synced override the source dropped) ------


def test_config_reset_is_only_for_a_synced_property_the_source_dropped():
    previous = {"retention.ms": "1000", "cleanup.policy": "compact"}
    current = {"cleanup.policy": "compact"}
    target = {"retention.ms": "1000", "cleanup.policy": "compact", "segment.ms": "60000"}
    # segment.ms is set only on the target: left alone.
    assert config_resets(previous=previous, current=current, target=target) == ("retention.ms",)


def test_no_reset_without_an_earlier_sync_or_when_the_target_changed_it_since():
    target = {"retention.ms": "1000"}
    assert config_resets(previous=None, current={}, target=target) == ()
    assert config_resets(previous={"retention.ms": "1000"}, current={}, target={"retention.ms": "5"}) == ()
    assert config_resets(previous={"retention.ms": "1000"}, current={}, target={}) == ()


def test_plan_resets_synced_property_and_leaves_excluded_and_target_only_overrides():
    source = _topics(TopicDescription("orders", 1, {"min.insync.replicas": "1"}))
    target = _topics(
        TopicDescription(
            "A.orders", 1, {"retention.ms": "1000", "segment.ms": "60000", "min.insync.replicas": "2"}
        )
    )
    flow_filter = ConfigPropertyFilter.for_flow(FLOW)
    previous = {
        "orders": replicated_configs(
            {"retention.ms": "1000", "min.insync.replicas": "1"}, config_filter=flow_filter
        )
    }
    plan = _plan(source, target, previous_configs=previous)
    assert [(u.topic, dict(u.changes), u.resets) for u in plan.update_configs] == [
        ("A.orders", {}, ("retention.ms",))
    ]
    # Without config sync due, nothing is reset.
    assert _plan(source, target, previous_configs=previous, sync_configs=False).update_configs == ()
