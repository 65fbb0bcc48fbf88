"""`TopicMetadataSync`: MirrorSourceConnector's metadata work for one flow, against real clusters.

Each `tick` asks the `Scheduler` whether `refresh.topics`, `sync.topic.configs` or `sync.topic.acls` is
due (the first tick does all three), lists both clusters, plans with `connector.plan_topic_sync` and applies the plan: create
remote topics, grow partitions, set changed configs and reset (delete the target override of) synced
configs the source stopped setting. The source configs seen at the last config sync are kept in memory
for that (`previous_configs`); a reset made on the source while no process held this flow's metadata
task is not seen (the first sync after a start has nothing to compare with). A failure is logged as an
ERROR naming the topic and the broker's reason and kept in `last_errors`; the rest of the plan still
applies, and the partitions that exist on the target keep replicating.

ACL sync (`acls.plan_topic_acls`, MM2's rule) copies the source's topic ACLs of the replicated topics onto
the remote topics, adding only the missing ones. A cluster without an authorizer cannot take part: the
sync then does nothing and `warnings` holds "ACL sync unsupported by cluster X: <reason>" (the metadata
worker reports it once as a flow warning), never silently nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from replication.acls import TopicAcl, acl_sync_unsupported_message, missing_acls, plan_topic_acls
from replication.config import ClusterConfig, FlowConfig
from replication.connector import (
    TopicPartition,
    TopicSelection,
    TopicSyncPlan,
    plan_topic_sync,
    replicated_configs,
    replicated_partitions,
)
from replication.filters import ConfigPropertyFilter
from replication.kafka.acls import AclSyncUnsupported, TopicAclAdmin
from replication.kafka.admin import ADMIN_TIMEOUT_S, TopicAdmin, TopicAdminError
from replication.kafka.internal_topics import InternalTopic, InternalTopicError
from replication.logonce import warn_once
from replication.policy import ReplicationPolicy, TopicDecision
from replication.scheduler import PeriodicJob, Scheduler

log = logging.getLogger(__name__)

REFRESH_TOPICS = "refresh.topics"
# A remote topic whose create or growth failed (a target busy creating thousands of partitions answers
# "Local: Timed out" and often creates it anyway) is looked at again this soon, doubling up to the refresh
# interval, instead of waiting for the next refresh (10 minutes by default): at 20,000 partitions one
# flow's 100 creates timed out and its 5,000 partitions waited 10 minutes to replicate.
RETRY_FIRST_S = 10.0
SYNC_TOPIC_CONFIGS = "sync.topic.configs"
SYNC_TOPIC_ACLS = "sync.topic.acls"


class TopicMetadataSync:
    def __init__(
        self,
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        policy: ReplicationPolicy,
        timeout_s: float = ADMIN_TIMEOUT_S,
        internal_topics: Sequence[InternalTopic] = (),
    ) -> None:
        """`timeout_s` bounds each admin request to either cluster. `internal_topics` are created before
        the first remote topic (`replication.kafka.source_io.task_internal_topics` says why)."""
        self.flow = flow
        self._timeout_s = timeout_s
        self._internal_topics = tuple(internal_topics)  # not created yet
        self.policy = policy
        self._source_admin = TopicAdmin(source, timeout_s=timeout_s)
        self._target_admin = TopicAdmin(target, timeout_s=timeout_s)
        self._source_acls = TopicAclAdmin(source, timeout_s=timeout_s)
        self._target_acls = TopicAclAdmin(target, timeout_s=timeout_s)
        self._topics = TopicSelection.of(flow, policy)
        self._config_filter = ConfigPropertyFilter.for_flow(flow)
        self._scheduler = Scheduler(
            [
                PeriodicJob(
                    REFRESH_TOPICS, flow.refresh_topics_interval_seconds, flow.refresh_topics_enabled
                ),
                PeriodicJob(
                    SYNC_TOPIC_CONFIGS,
                    flow.sync_topic_configs_interval_seconds,
                    flow.sync_topic_configs_enabled,
                ),
                PeriodicJob(
                    SYNC_TOPIC_ACLS, flow.sync_topic_acls_interval_seconds, flow.sync_topic_acls_enabled
                ),
            ]
        )
        self._synced_once = False
        self._retry_at: float | None = None  # a failed create or growth is retried from then on
        self._retry_s = RETRY_FIRST_S
        self._replicated: list[TopicPartition] = []
        self._source_configs: dict[str, dict[str, str]] = {}  # replicated configs at the last sync
        self._mirrored: tuple[TopicDecision, ...] = ()
        self._topic_errors: tuple[str, ...] = ()
        self._acl_errors: tuple[str, ...] = ()
        self.warnings: tuple[str, ...] = ()  # conditions to report once (ACL sync unsupported)
        self.acls_checked = False  # an ACL sync pass ran: `warnings` says what it found

    @property
    def last_errors(self) -> tuple[str, ...]:
        """The failures of the last topic sync and of the last ACL sync."""
        return self._topic_errors + self._acl_errors

    def tick(self, *, now: float) -> bool:
        """Run the due jobs; True when the set of replicated partitions changed."""
        due = set(self._scheduler.due(now=now))
        if not self._synced_once:
            due |= {REFRESH_TOPICS, SYNC_TOPIC_CONFIGS}
        if self._retry_at is not None and now >= self._retry_at:
            due.add(REFRESH_TOPICS)
        changed = False
        if due & {REFRESH_TOPICS, SYNC_TOPIC_CONFIGS}:
            previous = self._replicated
            self._replicated, unreplicated = self._sync(sync_configs=SYNC_TOPIC_CONFIGS in due)
            self._synced_once = True
            changed = self._replicated != previous
            self._schedule_retry(now=now, failed=unreplicated)
        if SYNC_TOPIC_ACLS in due:
            self._sync_acls()
        return changed

    def _schedule_retry(self, *, now: float, failed: bool) -> None:
        if not failed:
            self._retry_at, self._retry_s = None, RETRY_FIRST_S
            return
        self._retry_at = now + self._retry_s
        self._retry_s = min(self._retry_s * 2, max(RETRY_FIRST_S, self.flow.refresh_topics_interval_seconds))

    def _sync_acls(self) -> None:
        """Create the missing target ACLs for the source's topic ACLs of the replicated topics."""
        unsupported: list[str] = []
        errors: list[str] = []
        source_acls = self._read_acls(self._source_acls, unsupported=unsupported, errors=errors)
        target_acls = self._read_acls(self._target_acls, unsupported=unsupported, errors=errors)
        if source_acls is not None and target_acls is not None:
            wanted = plan_topic_acls(source_acls, mirrored=self._mirrored)
            missing = missing_acls(wanted, existing=target_acls)
            try:
                self._target_acls.create(missing)
                if missing:
                    log.info("flow %s: created %d topic ACL(s) on the target", self.flow.name, len(missing))
            except AclSyncUnsupported as exc:
                alias = self._target_acls.cluster.alias
                unsupported.append(acl_sync_unsupported_message(alias=alias, reason=str(exc)))
            except TopicAdminError as exc:
                errors.append(str(exc))
        self.warnings, self.acls_checked = tuple(unsupported), True
        for warning in unsupported:
            warn_once(log, "flow %s: %s", self.flow.name, warning)
        for error in errors:
            log.error("flow %s: ACL sync: %s", self.flow.name, error)
        self._acl_errors = tuple(errors)

    @staticmethod
    def _read_acls(
        admin: TopicAclAdmin, *, unsupported: list[str], errors: list[str]
    ) -> list[TopicAcl] | None:
        """The cluster's topic ACLs; None (and the reason added to `unsupported` or `errors`) if unreadable."""
        try:
            return admin.topic_acls()
        except AclSyncUnsupported as exc:
            unsupported.append(acl_sync_unsupported_message(alias=admin.cluster.alias, reason=str(exc)))
        except TopicAdminError as exc:
            errors.append(str(exc))
        return None

    def replicated_partitions(self) -> list[TopicPartition]:
        """Source topic-partitions whose remote topic-partition exists on the target."""
        return list(self._replicated)

    def _sync(self, *, sync_configs: bool) -> tuple[list[TopicPartition], bool]:
        """The replicated partitions, and whether a remote topic's create or growth failed."""
        source_counts = self._source_admin.partition_counts()
        mirrored = self._topics.mirrored(source_counts)
        target_counts = self._target_admin.partition_counts()
        source_topics = self._source_admin.describe_topics(
            {d.topic: source_counts[d.topic] for d in mirrored}
        )
        remote_names = {d.remote_topic for d in mirrored if d.remote_topic in target_counts}
        target_topics = self._target_admin.describe_topics(
            {name: target_counts[name] for name in remote_names}
        )
        mirrored = tuple(d for d in mirrored if d.topic in source_topics)  # deleted while we looked
        plan = plan_topic_sync(
            mirrored=mirrored,
            source_topics=source_topics,
            target_topics=target_topics,
            flow=self.flow,
            config_filter=self._config_filter,
            target_broker_count=self._target_admin.broker_count(),
            sync_configs=sync_configs,
            previous_configs=self._source_configs,
        )
        errors, failed, acknowledged, unreplicated = self._apply(plan, target_topics=target_topics)
        self._remember_configs(plan, source_topics=source_topics, synced=sync_configs, failed=failed)
        self._mirrored = plan.mirrored
        self._topic_errors = tuple(errors)
        # A topic Apache Kafka just created or grew may be missing from the metadata a broker answers for
        # a moment (KRaft brokers learn it from the metadata log): the counts the target acknowledged
        # count, or a new topic would wait for the next refresh (10 minutes by default) to replicate.
        remote_partitions = dict(self._target_admin.partition_counts())
        for name, count in acknowledged.items():
            remote_partitions[name] = max(remote_partitions.get(name, 0), count)
        partitions = replicated_partitions(
            plan, source_topics=source_topics, remote_partitions=remote_partitions
        )
        return partitions, unreplicated

    def _create_internal_topics(self) -> None:
        """The internal topics not created yet; one that fails is tried again before the next remote
        topic is created (its writer creates it anyway when it first writes)."""
        failed: list[InternalTopic] = []
        for topic in self._internal_topics:
            try:
                topic.ensure(timeout_s=self._timeout_s)
            except (InternalTopicError, TopicAdminError) as exc:
                log.warning("flow %s: creating internal topic %s failed: %s", self.flow.name, topic.name, exc)
                failed.append(topic)
        self._internal_topics = tuple(failed)

    def _remember_configs(
        self, plan: TopicSyncPlan, *, source_topics, synced: bool, failed: set[str]
    ) -> None:
        """Keep the source configs the target now reflects: every mirrored topic after a config sync,
        new remote topics after a refresh; a topic whose create or update failed keeps the last one."""
        remembered = {t.source_topic for t in plan.create} if not synced else {d.topic for d in plan.mirrored}
        mirrored = {d.topic for d in plan.mirrored}
        configs = {name: c for name, c in self._source_configs.items() if name in mirrored}
        for name in remembered - failed:
            configs[name] = replicated_configs(source_topics[name].configs, config_filter=self._config_filter)
        self._source_configs = configs

    def _apply(
        self, plan: TopicSyncPlan, *, target_topics
    ) -> tuple[list[str], set[str], dict[str, int], bool]:
        """Apply `plan`: the errors, the source topics whose create or config update failed, the
        partition counts of the remote topics the target acknowledged creating or growing, and whether a
        create or a growth failed (partitions left unreplicated: `RETRY_FIRST_S`)."""
        errors: list[str] = []
        failed: set[str] = set()
        acknowledged: dict[str, int] = {}
        partitions = {topic.name: topic.partitions for topic in plan.create}
        for warning in plan.warnings:
            warn_once(log, "flow %s: %s", self.flow.name, warning)
        if plan.create or plan.grow:
            self._create_internal_topics()
        for name, error in self._target_admin.create_topics(plan.create).items():
            if error is None:
                log.info("flow %s: created remote topic %s", self.flow.name, name)
                acknowledged[name] = partitions[name]
            else:
                errors.append(str(error))
                failed.update(t.source_topic for t in plan.create if t.name == name)
        for growth in plan.grow:
            try:
                self._target_admin.create_partitions(
                    growth.topic, current=growth.current, desired=growth.desired
                )
                acknowledged[growth.topic] = growth.desired
                log.info(
                    "flow %s: grew %s from %d to %d partitions",
                    self.flow.name,
                    growth.topic,
                    growth.current,
                    growth.desired,
                )
            except TopicAdminError as exc:
                errors.append(
                    f"{exc}; source topic {growth.source_topic} has {growth.desired} partitions, so its "
                    f"partitions {growth.current}..{growth.desired - 1} are not replicated until the "
                    f"target topic grows (the other partitions keep replicating)"
                )
        unreplicated = bool(errors)  # so far: the creates' and the growths' only
        for update in plan.update_configs:
            try:
                current = target_topics[update.topic].configs
                self._target_admin.set_topic_configs(
                    update.topic, update.changes, current=current, resets=update.resets
                )
                log.info(
                    "flow %s: synced configs %s of %s%s",
                    self.flow.name,
                    dict(update.changes),
                    update.topic,
                    f", reset {', '.join(update.resets)} to the default" if update.resets else "",
                )
            except TopicAdminError as exc:
                errors.append(str(exc))
                failed.add(update.source_topic)
        for reason in errors:
            log.error("flow %s: %s", self.flow.name, reason)
        return errors, failed, acknowledged, unreplicated
