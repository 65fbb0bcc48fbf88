"""A flow's schema work, built from its config: the registries of its clusters, the subjects it syncs and
their names on the target, the periodic sync (`SchemaSyncTask`, run with the flow's other metadata tasks)
and the ID rewrite its source tasks apply (`schema_id_rewriter`).

A cluster's registry is given by its `schema.registry.*` properties (`ClusterConfig.schema_registry`):
`url`, and `basic.auth.user.info` (`user:password`) or `bearer.auth.token`, stored and shown as the
cluster's other secrets are. A flow that syncs schemas while a cluster has no registry reports it as the
sync's error, and its records in the wire format wait (never copied with an ID the target does not know).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from replication.config import ClusterConfig, FlowConfig, SchemaIdMode
from replication.filters import SubjectFilter, TopicFilter
from replication.outbound import HostAllowlist
from replication.policy import ReplicationPolicy
from replication.schemas.ids import SchemaIdRewriter
from replication.schemas.rest import ConfluentRegistryClient, RegistryAuth
from replication.schemas.subjects import subject_renamer
from replication.schemas.sync import SchemaSyncResult, sync_schemas

log = logging.getLogger(__name__)


def registry_client(
    cluster: ClusterConfig, *, allowlist: HostAllowlist | None = None
) -> ConfluentRegistryClient:
    """The cluster's registry (a client whose every call fails, saying so, when it has none), reached where
    `allowlist` allows (by default the environment's MIRRORPLANE_OUTBOUND_HOSTS_ALLOWED)."""
    properties = cluster.schema_registry()
    user_info = properties.get("basic.auth.user.info")
    username, _, password = user_info.partition(":") if user_info else (None, "", None)
    auth = RegistryAuth(username=username, password=password, token=properties.get("bearer.auth.token"))
    return ConfluentRegistryClient(
        properties.get("url", ""),
        auth=auth,
        name=f"cluster {cluster.alias}",
        allowlist=allowlist or HostAllowlist.from_environ(),
    )


def flow_subject_renamer(flow: FlowConfig, policy: ReplicationPolicy) -> Callable[[str], str | None]:
    topics = TopicFilter.for_flow(flow)
    return subject_renamer(
        policy=policy,
        source_alias=flow.source,
        target_alias=flow.target,
        subject_filter=SubjectFilter.for_flow(flow),
        topic_replicated=lambda topic: (
            topics.should_replicate_topic(topic) and not policy.is_internal_topic(topic)
        ),
    )


class SchemaSyncTask:
    """The flow's subjects synced every `schemas.sync.interval.seconds` (a `PeriodicTask`); `last_result`
    holds what the latest pass did, `last_errors` its errors (the worker records them as flow events)."""

    def __init__(
        self, *, flow: FlowConfig, source: ClusterConfig, target: ClusterConfig, policy: ReplicationPolicy
    ) -> None:
        self.flow = flow
        self._source, self._target = registry_client(source), registry_client(target)
        self._rename = flow_subject_renamer(flow, policy)
        self._next_at = 0.0
        self.last_result: SchemaSyncResult | None = None

    @property
    def last_errors(self) -> tuple[str, ...]:
        return tuple(self.last_result.errors) if self.last_result else ()

    @property
    def refused(self) -> dict[str, str]:
        """The source subjects the latest pass refuses (`SchemaSyncResult.refused`)."""
        return dict(self.last_result.refused) if self.last_result else {}

    def tick(self, *, now: float) -> None:
        if now < self._next_at:
            return
        self._next_at = now + self.flow.schemas_sync_interval_seconds
        self.last_result = sync_schemas(
            source=self._source, target=self._target, rename=self._rename, mode=self.flow.schemas_sync_mode
        )
        if self.last_result.registered:
            log.info(
                "flow %s: registered %d schema version(s) on the target registry (%d subject(s) synced)",
                self.flow.name,
                self.last_result.registered,
                len(self.last_result.subjects),
            )

    def close(self) -> None:
        """Nothing held between passes (each call is one HTTP request)."""


def schema_sync_task(
    *, flow: FlowConfig, source: ClusterConfig, target: ClusterConfig, policy: ReplicationPolicy
) -> SchemaSyncTask | None:
    """The flow's schema sync, or None when it syncs no schemas."""
    if flow.schemas_sync_mode == SchemaIdMode.NONE:
        return None
    return SchemaSyncTask(flow=flow, source=source, target=target, policy=policy)


def schema_id_rewriter(
    *,
    flow: FlowConfig,
    source: ClusterConfig,
    target: ClusterConfig,
    policy: ReplicationPolicy,
    refused: Callable[[], Mapping[str, str]] | None = None,
) -> SchemaIdRewriter | None:
    """What the flow's source tasks rewrite (`rewrite-ids`) or check (`keep-ids`) schema IDs with, or
    None for a flow that syncs no schemas (records copied byte for byte). `refused` answers the subjects
    the flow's schema sync refuses (its latest pass, wherever it runs), which a held record names."""
    if flow.schemas_sync_mode == SchemaIdMode.NONE:
        return None
    return SchemaIdRewriter(
        source=registry_client(source),
        target=registry_client(target),
        rename=flow_subject_renamer(flow, policy),
        keep_ids=flow.schemas_sync_mode == SchemaIdMode.KEEP_IDS,
        refused=refused,
    )
