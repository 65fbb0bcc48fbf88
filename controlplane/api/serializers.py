"""Request/response shapes. Shape checks only: the engine's rules run in services (errors at the field)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils.urls import replace_query_param

from controlplane import browse
from controlplane.api.rows import FieldsBuiltOnce, RowsSerializer
from controlplane.core.models import AuditEvent
from controlplane.flows import engine, lifecycle
from controlplane.flows.models import Cluster, Flow
from controlplane.status import partitions
from controlplane.status.models import FlowEvent, FlowPartitionStatus
from controlplane.status.rollup import HEALTHS
from replication.config import FLOW_PROPERTIES
from replication.policy import ACCEPTED_POLICY_CLASSES

INT32 = {"min_value": -(2**31), "max_value": 2**31 - 1}
MAX_SECRET_LENGTH = 100_000


def _property_value() -> serializers.CharField:
    return serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=MAX_SECRET_LENGTH)


class ScopedPropertiesField(serializers.DictField):
    """{"client": {...}, "producer": {...}, "consumer": {...}, "admin": {...}}: property name -> value."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.DictField(child=_property_value()), **kwargs)

    def to_internal_value(self, data):
        scoped = super().to_internal_value(data)
        if any("\x00" in name for scope, properties in scoped.items() for name in (scope, *properties)):
            # PostgreSQL refuses NUL bytes outright: even the audit of the refusal could not be stored.
            raise serializers.ValidationError("a scope or property name cannot contain a NUL character")
        return scoped


class ClusterSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    client_properties = ScopedPropertiesField(
        required=False,
        help_text='non-secret client overrides by scope, e.g. {"client": {"client.id": "mirror"}, '
        '"producer": {"linger.ms": "20"}}',
    )
    secret_properties = ScopedPropertiesField(
        write_only=True,
        required=False,
        help_text="write-only secret client properties by scope (e.g. sasl.jaas.config); an empty value removes one",
    )
    sasl_username = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=10_000
    )
    sasl_password = serializers.CharField(
        write_only=True, required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_SECRET_LENGTH
    )
    ssl_ca_pem = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=MAX_SECRET_LENGTH
    )
    ssl_certificate_pem = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=MAX_SECRET_LENGTH
    )
    ssl_key_pem = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=MAX_SECRET_LENGTH
    )
    ssl_key_password = serializers.CharField(
        write_only=True, required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_SECRET_LENGTH
    )
    secrets_set = serializers.SerializerMethodField(
        help_text="names of the secrets that are set (values never shown)"
    )

    class Meta:
        model = Cluster
        list_serializer_class = RowsSerializer
        fields = [
            "id",
            "alias",
            "bootstrap_servers",
            "security_protocol",
            "sasl_mechanism",
            "client_properties",
            "secrets_set",
            "created_at",
            "updated_at",
            *engine.SECRET_FIELDS,
            "secret_properties",
        ]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs: dict[str, Mapping[str, object]] = {
            "alias": {"validators": []}
        }  # uniqueness is the service's rule (one message)

    def get_secrets_set(self, cluster: Cluster) -> list[str]:
        return engine.secret_names(engine.cluster_secrets(cluster))

    def split(self) -> tuple[dict, dict]:
        """(column changes, secret changes by scope) from the validated request."""
        data = dict(self.validated_data)
        secrets: dict[str, dict[str, str]] = {
            scope: dict(values) for scope, values in data.pop("secret_properties", {}).items()
        }
        for field_name, property_name in engine.SECRET_FIELDS.items():
            if field_name in data:
                secrets.setdefault("client", {})[property_name] = data.pop(field_name)
        return data, secrets


def _pattern_list(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=1000, validators=[_no_comma]),
        help_text="Java regular expressions matched against whole names",
        **kwargs,
    )


def _no_comma(value: str) -> None:
    if "," in value:
        raise serializers.ValidationError("MM2 lists are comma-separated: a pattern cannot contain ','")


class ClusterAliasField(serializers.SlugRelatedField):
    """A cluster named by its alias; text no alias can be (a NUL byte, too long) is refused before the
    database sees it (PostgreSQL rejects NUL bytes outright)."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="alias", queryset=Cluster.objects.all(), **kwargs)

    def to_internal_value(self, data):
        max_length = Cluster._meta.get_field("alias").max_length
        if not isinstance(data, str) or "\x00" in data or len(data) > max_length:
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data)[:max_length])
        return super().to_internal_value(data)


class FlowSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    source = ClusterAliasField()
    target = ClusterAliasField()
    name = serializers.CharField(read_only=True)
    allowed_actions = serializers.SerializerMethodField(
        help_text="operator actions the flow's state allows now (controlplane.flows.lifecycle)"
    )
    topics = _pattern_list(required=False)
    topics_exclude = _pattern_list(required=False)
    groups = _pattern_list(required=False)
    groups_exclude = _pattern_list(required=False)
    config_properties_exclude = _pattern_list(required=False)
    replication_policy_class = serializers.ChoiceField(choices=ACCEPTED_POLICY_CLASSES, required=False)
    extra = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=10_000),
        required=False,
        help_text='flow-scoped client overrides, e.g. {"producer.linger.ms": "20"}',
    )
    pool = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,  # the service explains a name that is too long
        help_text="the worker pool the flow runs on (workers consuming replication.<pool>); empty: default",
    )

    class Meta:
        model = Flow
        list_serializer_class = RowsSerializer
        fields = [
            "id",
            "name",
            "source",
            "target",
            "state",
            "state_reason",
            "state_changed_at",
            "allowed_actions",
            *(prop.field for prop in FLOW_PROPERTIES),
            "extra",
            "pool",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["state", "state_reason", "state_changed_at", "created_at", "updated_at"]
        extra_kwargs: dict[str, Mapping[str, object]] = {
            prop.field: INT32 for prop in FLOW_PROPERTIES if prop.kind is int
        }
        validators: list[object] = []  # one flow per pair and source != target are the service's rules

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_allowed_actions(self, flow: Flow) -> list[str]:
        return sorted(lifecycle.allowed_actions(flow.state))


class TopicSerializer(serializers.Serializer):
    topic = serializers.CharField(source="decision.topic")
    partitions = serializers.IntegerField()
    replicate = serializers.BooleanField(source="decision.replicate")
    remote_topic = serializers.CharField(source="decision.remote_topic", allow_null=True)
    reason = serializers.ChoiceField(
        source="decision.reason", choices=["filter", "internal", "cycle"], allow_null=True
    )
    detail = serializers.CharField(source="decision.detail", allow_null=True)


class PartitionLiveSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """A status row (`selectors.PartitionLive`) with its age: `state` is STALE once it is too old."""

    state = serializers.CharField(help_text="the worker's Burrow state (OK, STOP, ERR), or STALE")
    reported_state = serializers.CharField(source="row.state", help_text="the state the worker last wrote")
    health = serializers.ChoiceField(
        choices=HEALTHS, help_text="as the pages colour it: the flow's rule on this partition's figures"
    )
    age_s = serializers.FloatField(help_text="seconds since observed_at")
    stale = serializers.BooleanField()

    class Meta:
        model = FlowPartitionStatus
        list_serializer_class = RowsSerializer
        exclude = ["id", "flow"]


class FlowEventSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    detail = serializers.SerializerMethodField(
        help_text="a data_mismatch holds both records: on a masked topic, viewers see values and header "
        "values masked, as in the browser"
    )

    class Meta:
        model = FlowEvent
        list_serializer_class = RowsSerializer
        exclude = ["flow"]

    def get_detail(self, event: FlowEvent) -> dict:
        return browse.event_detail_shown(event=event, role=self.context.get("role"))


class FlowSummarySerializer(serializers.Serializer):
    """A flow's live roll-up (`selectors.FlowSummary`), by the pages' rule (docs/lag.md)."""

    id = serializers.IntegerField(source="flow.pk")
    flow = serializers.CharField(source="flow.name")
    state = serializers.CharField(source="flow.state")
    state_reason = serializers.CharField(source="flow.state_reason")
    enabled = serializers.BooleanField(source="flow.enabled")
    health = serializers.ChoiceField(
        choices=HEALTHS,
        help_text="as the pages colour it: state, age, and lag against the RPO budget (docs/lag.md)",
    )
    status = serializers.CharField(
        help_text="worst partition: OK, WARN, STALE or ERR; UNKNOWN before any report"
    )
    records_behind = serializers.IntegerField(allow_null=True, help_text="sum over the partitions")
    seconds_behind = serializers.FloatField(
        allow_null=True, help_text="the worst partition's; null while a partition behind has no known age"
    )
    seconds_behind_at_least = serializers.FloatField(
        allow_null=True, help_text="the worst known partition's: a lower bound while seconds_behind is null"
    )
    observed_at = serializers.DateTimeField(allow_null=True, help_text="the newest observation")
    age_s = serializers.FloatField(allow_null=True, help_text="seconds since observed_at")
    stale = serializers.BooleanField()
    partition_count = serializers.IntegerField(help_text="partitions reported")
    pool = serializers.CharField(source="flow.pool", help_text="its worker pool; empty: the default pool")
    pool_live_workers = serializers.IntegerField(
        source="pool.live_workers",
        allow_null=True,
        help_text="live workers consuming the pool's queue; null when Redis does not answer",
    )
    pool_without_workers = serializers.BooleanField(
        help_text="it should replicate and no live worker consumes its pool's queue: nothing runs it"
    )

    class Meta:
        list_serializer_class = RowsSerializer


class SchemaSyncStatusSerializer(serializers.Serializer):
    mode = serializers.CharField(help_text="schemas.sync.mode: rewrite-ids or keep-ids")
    observed_at = serializers.DateTimeField(
        allow_null=True, help_text="the sync's latest pass; null before one"
    )
    age_s = serializers.FloatField(allow_null=True)
    subjects_synced = serializers.IntegerField(allow_null=True)
    versions_behind = serializers.IntegerField(
        allow_null=True, help_text="source versions not on the target registry (errors: the flow's events)"
    )
    errors = serializers.IntegerField(
        allow_null=True, help_text="subjects the latest pass could not sync (each a flow error event)"
    )
    id_map = serializers.SerializerMethodField(
        help_text="source schema ID -> target schema ID as the latest pass found them (its age: age_s)"
    )

    def get_id_map(self, status) -> dict[str, int]:
        return {str(source): target for source, target in status.id_map}


class PageQuerySerializer(serializers.Serializer):
    """Which page of a flow's partitions an answer holds (worst first)."""

    page = serializers.IntegerField(
        min_value=1, max_value=10**9, default=1, help_text="from 1; past the last page: the last"
    )
    page_size = serializers.IntegerField(min_value=1, max_value=500, default=partitions.PAGE_SIZE)


class PartitionQuerySerializer(PageQuerySerializer):
    """Which page of a flow's partitions `flows/{id}/status/` answers with (worst first)."""

    search = serializers.CharField(
        required=False, allow_blank=True, max_length=249, default="", help_text="part of a topic name"
    )
    state = serializers.ChoiceField(
        choices=partitions.STATES,
        required=False,
        allow_blank=True,
        default="",
        help_text="only partitions showing this state (the worker's, or STALE once its report is too old)",
    )


class PartitionPageSerializer(serializers.Serializer):
    """A page of a flow's partitions (`status.partitions.PartitionPage`), worst first."""

    count = serializers.IntegerField(help_text="partitions matching search and state")
    page = serializers.IntegerField(source="number")
    page_size = serializers.IntegerField()
    pages = serializers.IntegerField(source="num_pages")
    next = serializers.SerializerMethodField(help_text="the next page's URL; null on the last")
    previous = serializers.SerializerMethodField(help_text="the previous page's URL; null on the first")
    results = PartitionLiveSerializer(
        source="partitions",
        many=True,
        help_text="errors (STOP, STALL, REWIND, ERR) first, then STALE, WARN; within each a partition "
        "behind for a time not known yet, then the most seconds and records behind; then topic, partition",
    )

    def _url(self, number: int) -> str:
        return replace_query_param(self.context["request"].build_absolute_uri(), "page", number)

    def get_next(self, page) -> str | None:
        return self._url(page.number + 1) if page.has_next else None

    def get_previous(self, page) -> str | None:
        return self._url(page.number - 1) if page.has_previous else None


class FlowStatusSerializer(FlowSummarySerializer):
    stale_after_s = serializers.FloatField()
    partitions = serializers.SerializerMethodField(
        help_text="one page of the flow's partitions, as the query asks (page, page_size, search, state)"
    )
    events = FlowEventSerializer(many=True)
    schemas = SchemaSyncStatusSerializer(
        allow_null=True, help_text="the schema registry sync (docs/schemas.md); null when the flow syncs none"
    )

    @extend_schema_field(PartitionPageSerializer)
    def get_partitions(self, status) -> dict:
        return PartitionPageSerializer(self.context["partition_page"], context=self.context).data


class ReplicationActivitySerializer(serializers.Serializer):
    runnable = serializers.BooleanField(help_text="some flow is in a state the workers replicate")
    last_report_at = serializers.DateTimeField(
        allow_null=True, help_text="the newest slice report of any flow"
    )
    age_s = serializers.FloatField(allow_null=True)
    replication_workers = serializers.IntegerField(
        allow_null=True, help_text="workers alive on the replication queue; null when Redis does not answer"
    )
    silent = serializers.BooleanField(
        help_text="flows should replicate, no slice reported within stale_after_s"
    )
    no_workers = serializers.BooleanField(help_text="flows should replicate, no replication worker is alive")


class LiveStatusSerializer(serializers.Serializer):
    stale_after_s = serializers.FloatField()
    replication = ReplicationActivitySerializer()
    flows = FlowSummarySerializer(many=True)


class ClusterCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    brokers = serializers.IntegerField(allow_null=True)
    topic_count = serializers.IntegerField(allow_null=True)
    latency_ms = serializers.FloatField(allow_null=True)
    failure = serializers.ChoiceField(
        choices=["dns", "refused", "auth", "tls", "timeout", "other"], allow_null=True
    )
    message = serializers.CharField()


class ApiTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="the new key: shown only in this answer")
    prefix = serializers.CharField()
    expires_at = serializers.DateTimeField(allow_null=True)


class Mm2ImportRequestSerializer(serializers.Serializer):
    text = serializers.CharField(
        max_length=1_000_000,
        trim_whitespace=False,
        help_text="mm2.properties content, or a Strimzi KafkaMirrorMaker2 resource (YAML)",
    )
    dry_run = serializers.BooleanField(default=False, help_text="only report what would change")
    force = serializers.BooleanField(
        default=False,
        help_text="import a cluster that shares a bootstrap server or its cluster id with another alias's (refused otherwise: "
        "one cluster under two aliases makes replication loops)",
    )
    placeholder_values = serializers.DictField(
        child=serializers.CharField(trim_whitespace=False),
        required=False,
        write_only=True,
        help_text="values of the text's ${env:VAR} placeholders, by variable name (write-only; stored as "
        "secrets). The server's own environment gives only the variables MIRRORPLANE_IMPORT_ENV_ALLOWED names",
    )


class ImportChangeSerializer(serializers.Serializer):
    object_type = serializers.ChoiceField(choices=["cluster", "flow"])
    name = serializers.CharField()
    change = serializers.ChoiceField(choices=["create", "update", "unchanged"])
    fields = serializers.DictField(child=serializers.DictField(), help_text="field -> {before, after}")


class PreviewTopicSerializer(serializers.Serializer):
    topic = serializers.CharField()
    remote_topic = serializers.CharField()
    partitions = serializers.IntegerField()
    loop = serializers.CharField(allow_null=True, help_text="why mirroring it copies it back; null when not")


class FlowPreviewSerializer(serializers.Serializer):
    flow = serializers.CharField()
    enabled = serializers.BooleanField()
    read_at = serializers.DateTimeField(allow_null=True, help_text="when the source's topics were read")
    replicated = PreviewTopicSerializer(
        many=True, help_text="the topics it would mirror (loops first, at most 200)"
    )
    replicated_count = serializers.IntegerField()
    loop_count = serializers.IntegerField()
    not_replicated = serializers.DictField(child=serializers.IntegerField(), help_text="reason -> topics")
    same_cluster = serializers.CharField(allow_null=True)
    problem = serializers.CharField(allow_null=True, help_text="the source did not answer")


class Mm2ImportResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    applied = serializers.BooleanField()
    changes = ImportChangeSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())
    previews = FlowPreviewSerializer(
        many=True, help_text="dry run only: per imported flow, the topics it would mirror now, loops flagged"
    )


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "at",
            "actor_name",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "before",
            "after",
            "outcome",
            "detail",
            "client_address",
        ]


class PoolWorkerSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="the Celery worker's name")
    queues = serializers.ListField(child=serializers.CharField())
    pid = serializers.IntegerField()
    observed_at = serializers.SerializerMethodField(
        help_text="its last announcement (seen within 3 intervals)"
    )
    age_s = serializers.SerializerMethodField()
    slices = serializers.SerializerMethodField(help_text="slices run since it started")
    slices_per_s = serializers.SerializerMethodField(help_text="since its previous announcement")
    leases_held = serializers.SerializerMethodField(help_text="chains it holds now")

    @extend_schema_field(serializers.DateTimeField())
    def get_observed_at(self, worker) -> str:
        return datetime.datetime.fromtimestamp(worker.observed_at, datetime.UTC).isoformat()

    @extend_schema_field(serializers.FloatField())
    def get_age_s(self, worker) -> float:
        return round(worker.age_s(self.context["now"]), 3)

    @extend_schema_field(serializers.IntegerField())
    def get_slices(self, worker) -> int:
        return int(worker.stats.get("slices", 0))

    @extend_schema_field(serializers.FloatField())
    def get_slices_per_s(self, worker) -> float:
        return float(worker.stats.get("slices_per_s", 0.0))

    @extend_schema_field(serializers.IntegerField())
    def get_leases_held(self, worker) -> int:
        return int(worker.stats.get("leases_held", 0))


class PoolFlowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    runnable = serializers.BooleanField(help_text="in a state the workers replicate")


class PoolSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="empty for the default pool")
    label = serializers.CharField()
    queue = serializers.CharField(help_text="its workers consume this Celery queue")
    workers_known = serializers.BooleanField(help_text="false when Redis did not answer")
    live = serializers.BooleanField(help_text="some worker consuming its queue was seen recently")
    slices_per_s = serializers.FloatField()
    leases_held = serializers.IntegerField()
    workers = PoolWorkerSerializer(many=True)
    flows = PoolFlowSerializer(many=True, help_text="the flows pinned to it")
    flows_waiting = PoolFlowSerializer(
        many=True, help_text="flows that should replicate while no live worker consumes the pool: flagged"
    )
