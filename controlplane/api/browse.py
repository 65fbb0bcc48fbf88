"""Topic and message browser and consumer group API: the reads the browser and group pages show, as
JSON, and the offset reset.

Reads need the viewer role (values of masked topics hidden from viewers). A group's offset reset and
deletion need the operator role, checked before the body is read (a refusal audited).
Every answer carries `read_at` and `read_ms`; a cluster that does not answer is 502 with its reason.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from controlplane import browse
from controlplane.api.fields import WholeNumberField
from controlplane.api.permissions import request_role
from controlplane.browse import group_changes, groups, record_search
from controlplane.core.bounds import INT64_MAX, INT64_MIN
from controlplane.core.errors import ClusterUnavailable
from controlplane.core.roles import Role
from controlplane.flows import selectors

SEEK_PARAMETERS = [
    OpenApiParameter("partition", int, description="partition number (default 0)"),
    OpenApiParameter("offset", int, description="first offset to read"),
    OpenApiParameter("time", str, description="or the moment to seek to: ISO 8601 or epoch ms"),
    OpenApiParameter("max_records", int, description=f"1 to {browse.MAX_RECORDS} (default 20)"),
    OpenApiParameter("format", str, enum=[f.value for f in browse.ValueFormat], description="default auto"),
]


class _NoUrlFormatOverride:
    """The REST framework's settings without its `?format=` renderer override."""

    URL_FORMAT_OVERRIDE = None

    def __getattr__(self, name: str):
        return getattr(api_settings, name)


class ValueFormatNegotiation(DefaultContentNegotiation):
    """Renderers chosen by the Accept header alone: in the browser API `?format=` is how values are
    decoded (auto, text, json, hex), which the REST framework would otherwise take as the renderer to use
    (and answer 404 for hex and text)."""

    settings = _NoUrlFormatOverride()


class RecordsView(APIView):
    """A view of records: its `format` query parameter is the value format (`ValueFormatNegotiation`)."""

    content_negotiation_class = ValueFormatNegotiation


def _cluster(pk: str):
    return get_object_or_404(selectors.cluster_list(), pk=pk)


def _read(obj) -> dict:
    return {"read_at": obj.read_at.isoformat() if obj.read_at else None, "read_ms": obj.read_ms}


def _mirror(mirror: browse.Mirror) -> dict:
    return {
        "flow": mirror.flow.pk,
        "flow_name": mirror.flow.name,
        "role": mirror.role,
        "source_topic": mirror.source_topic,
        "remote_topic": mirror.remote_topic,
    }


class TopicListView(APIView):
    @extend_schema(
        summary="The cluster's topics now, with partition counts and sizes on disk (every replica)",
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk):
        listing = browse.topic_list(cluster=_cluster(pk))
        return Response(
            {
                "cluster": listing.cluster.alias,
                **_read(listing),
                "sizes": {**_read(listing.sizes), "unknown": listing.sizes.unknown},
                "topics": [
                    {
                        "name": t.name,
                        "partitions": t.partitions,
                        "size_bytes": size.total_bytes if size else None,
                        "mirrors": [_mirror(m) for m in mirrors],
                    }
                    for t, mirrors, size in listing.rows
                ],
            }
        )


def _size(size: browse.SizesOnDisk, sizes) -> dict:
    return {
        **_read(size),
        "total_bytes": sizes.total_bytes if sizes else None,
        "leader_bytes": sizes.leader_bytes if sizes else None,
        "unreported_brokers": list(sizes.unreported_brokers) if sizes else [],
        "unknown": size.unknown,
    }


def _partition_size(size) -> dict | None:
    if size is None:
        return None
    return {
        "leader_bytes": size.leader_bytes,
        "total_bytes": size.total_bytes,
        "replicas": [
            {"broker": r.broker, "size_bytes": r.size_bytes, "offset_lag": r.offset_lag}
            for r in size.replicas
        ],
    }


def _config_sync(sync: browse.ConfigSync) -> dict:
    return {
        **_mirror(sync.mirror),
        "other_cluster": sync.mirror.other_cluster.alias,
        "read_at": sync.read_at.isoformat() if sync.read_at else None,
        "enabled": sync.enabled,
        "target_exists": sync.target_exists,
        "changes": sync.changes,
        "problem": sync.problem,
        "rows": [
            {"name": row.name, "source": row.source, "target": row.target, "action": str(row.action)}
            for row in sync.rows
        ],
    }


class TopicDetailsView(APIView):
    @extend_schema(
        summary="A topic's partitions with their replicas and size on disk, retention, every config with "
        "where it comes from, and what each flow's config sync will change on the copy",
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk, topic):
        details = browse.topic_details(cluster=_cluster(pk), topic=topic)
        info = details.info
        return Response(
            {
                "cluster": details.cluster.alias,
                "topic": info.name,
                **_read(details),
                "replication_factor": info.replication_factor,
                "under_replicated": info.under_replicated,
                "retention_ms": details.retention_ms,
                "retention_bytes": details.retention_bytes,
                "size": _size(details.size, details.sizes),
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "replicas": list(p.replicas),
                        "in_sync": list(p.in_sync),
                        "size": _partition_size(size),
                    }
                    for p, size in details.partition_rows
                ],
                "configs": [
                    {"name": c.name, "value": c.value, "source": c.source, "is_default": c.is_default}
                    for c in info.configs
                ],
                "config_syncs": [_config_sync(sync) for sync in details.config_syncs],
            }
        )


class TopicRecordsView(RecordsView):
    @extend_schema(
        summary="A topic's partitions and at most max_records records of one partition from an offset, "
        "a moment, or (neither) the newest",
        parameters=SEEK_PARAMETERS,
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk, topic):
        page = browse.topic_records(
            cluster=_cluster(pk),
            topic=topic,
            seek=browse.parse_seek(request.query_params),
            role=request_role(request),
        )
        return Response(
            {
                "cluster": page.cluster.alias,
                "topic": page.topic,
                **_read(page),
                "seek": page.seek.to_dict(),
                "partitions": [
                    {"partition": p.partition, "earliest": p.earliest, "end": p.end} for p in page.partitions
                ],
                "start_offset": page.start_offset,
                "complete": page.complete,
                "masked": page.masked,
                "notes": page.notes,
                "mirrors": [_mirror(m) for m in page.mirrors],
                "records": [r.to_dict() for r in page.records],
            }
        )


SEARCH_PARAMETERS = [
    OpenApiParameter("key", str, description="the key contains this (UTF-8 text, matched as bytes)"),
    OpenApiParameter("value", str, description="the value contains this (matched as bytes)"),
    OpenApiParameter(
        "json_path", str, description="the value is JSON with something at this path: $.order.id"
    ),
    OpenApiParameter(
        "json_value", str, description='... equal to this (read as JSON when it is: 7, true, "x")'
    ),
    OpenApiParameter("header", str, description="a header of this name, or name=value"),
    OpenApiParameter("since", str, description="timestamp at or after: ISO 8601 or epoch ms"),
    OpenApiParameter("until", str, description="timestamp before: ISO 8601 or epoch ms"),
    OpenApiParameter(
        "max_scanned",
        int,
        description="records to read, all partitions together (default and "
        "most: MIRRORPLANE_BROWSE_MAX_SCANNED)",
    ),
    OpenApiParameter(
        "max_records", int, description=f"matches returned, 1 to {browse.MAX_RECORDS} (default 50)"
    ),
    OpenApiParameter("format", str, enum=[f.value for f in browse.ValueFormat], description="default auto"),
]


class TopicSearchView(RecordsView):
    @extend_schema(
        summary="Records of every partition of a topic matching key, value, JSON path, header and time range, "
        "read within max_scanned records and the web read timeout; says how many were read and where",
        parameters=SEARCH_PARAMETERS,
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk, topic):
        page = record_search.topic_search(
            cluster=_cluster(pk),
            topic=topic,
            search=record_search.parse_search(request.query_params),
            role=request_role(request),
        )
        return Response(page.to_dict())


class TopicTailView(RecordsView):
    @extend_schema(
        summary="A live tail's next read: the records matching the search parameters that came after "
        "positions (none the first time: its positions are the ends), newest first, bounded like a search",
        parameters=[
            OpenApiParameter("positions", str, description="the previous answer's positions: 0:120,1:98"),
            *SEARCH_PARAMETERS,
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk, topic):
        page = record_search.topic_tail(
            cluster=_cluster(pk),
            topic=topic,
            search=record_search.parse_search(request.query_params),
            positions=request.query_params.get("positions", ""),
            role=request_role(request),
        )
        return Response(page.to_dict())


class RecordCopiesView(RecordsView):
    @extend_schema(
        summary="Source records of a mirrored topic beside their copies at the translated offsets on the "
        "target: equal, different (naming the fields), missing, or not replicated yet",
        parameters=[
            OpenApiParameter("topic", str, required=True, description="the source topic"),
            *SEEK_PARAMETERS,
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk):
        flow = get_object_or_404(selectors.flow_list(), pk=pk)
        page = browse.record_copies(
            flow=flow,
            topic=request.query_params.get("topic", ""),
            seek=browse.parse_seek(request.query_params),
            role=request_role(request),
        )
        return Response(
            {
                "flow": flow.pk,
                "flow_name": flow.name,
                "topic": page.topic,
                "remote_topic": page.remote_topic,
                **_read(page),
                "seek": page.seek.to_dict(),
                "masked": page.masked,
                "notes": page.notes,
                "counts": page.counts,
                "copies": [c.to_dict() for c in page.copies],
            }
        )


class GroupListView(APIView):
    @extend_schema(
        operation_id="v1_clusters_groups_list",
        summary="The cluster's consumer groups: state, members, checkpointing flows",
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk):
        cluster = _cluster(pk)
        (listing,) = groups.group_list(clusters=[cluster])
        if listing.problem:
            raise ClusterUnavailable(listing.problem)
        return Response(
            {
                "cluster": cluster.alias,
                **_read(listing),
                "described_all": listing.described_all,
                "groups": [
                    {
                        "group": g.group,
                        "state": g.state,
                        "members": g.members,
                        "partitions": g.partitions,
                        "lag": g.lag,
                        "flows": [{"id": f.pk, "name": f.name} for f in g.flows],
                    }
                    for g in listing.groups
                ],
            }
        )


class GroupDetailView(APIView):
    @extend_schema(
        summary="A consumer group: state, members, committed offset, end offset and lag per partition; per "
        "checkpointing flow the translated offset, the checkpoint's age and what a failover would write",
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk, group):
        detail = groups.group_detail(cluster=_cluster(pk), group=group)
        d = detail.description
        return Response(
            {
                "cluster": detail.cluster.alias,
                "group": detail.group,
                **_read(detail),
                "state": d.state,
                "active": d.active,
                "partition_assignor": d.partition_assignor,
                "members": [
                    {
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
                    }
                    for m in d.members
                ],
                "lag": detail.total_lag,
                "partitions": [vars(p) for p in detail.partitions],
                "flows": [
                    {
                        "flow": fc.flow.pk,
                        "flow_name": fc.flow.name,
                        "target_state": fc.target_state,
                        "problem": fc.problem,
                        "checkpoints_complete": fc.checkpoints_complete,
                        "offset_syncs_complete": fc.offset_syncs_complete,
                        "partitions": [vars(row) for row in fc.rows],
                    }
                    for fc in detail.flows
                ],
                "reset_flows": [{"id": f.pk, "name": f.name} for f in detail.reset_flows],
            }
        )


class GroupResetSerializer(serializers.Serializer):
    strategy = serializers.ChoiceField(choices=[s.value for s in group_changes.ResetStrategy])
    timestamp = serializers.CharField(
        required=False, allow_blank=True, help_text="for timestamp: ISO 8601 or epoch ms"
    )
    shift = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=INT64_MIN,
        max_value=INT64_MAX,
        help_text="for shift: records to move the committed offset by (negative: back)",
    )
    offset = WholeNumberField(required=False, allow_null=True, help_text="for offset: the offset to write")
    flow = WholeNumberField(
        required=False, allow_null=True, help_text="for translated: a flow into this cluster"
    )
    topic = serializers.CharField(
        required=False, allow_blank=True, help_text="default: the group's committed topics"
    )
    partitions = serializers.ListField(
        child=WholeNumberField(max_value=group_changes.PARTITION_MAX),
        required=False,
        max_length=10_000,
        help_text="of topic (default: all of them)",
    )
    dry_run = serializers.BooleanField(default=True, help_text="plan only (the default): nothing is written")


class GroupChangeView(APIView):
    """A group's writes: the role (operator) is checked before the body is read, refusals audited."""

    action_roles = {"update": Role.OPERATOR, "delete": Role.OPERATOR}
    basename = "consumer_group"


class GroupResetView(GroupChangeView):
    action = "update"

    @extend_schema(
        summary="Reset an inactive group's offsets (operator): earliest, latest, timestamp, shift, offset or "
        "translated, kept within the log start and the end; dry_run (the default) only plans",
        request=GroupResetSerializer,
        responses=OpenApiTypes.OBJECT,
    )
    def post(self, request, pk, group):
        serializer = GroupResetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        result = group_changes.group_offsets_reset(
            actor=request.user,
            cluster=_cluster(pk),
            group=group,
            strategy=data["strategy"],
            timestamp=data.get("timestamp", ""),
            flow_id=data.get("flow"),
            topic=data.get("topic", ""),
            partitions=data.get("partitions", ()),
            shift=data.get("shift"),
            offset=data.get("offset"),
            dry_run=data["dry_run"],
        )
        return Response(result.to_dict())


class GroupDeleteSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField(
        default=True, help_text="show what goes (the default): nothing deleted"
    )


class GroupDeleteView(GroupChangeView):
    action = "delete"

    @extend_schema(
        summary="Delete an inactive group and its committed offsets (operator); dry_run (the default) only "
        "shows them",
        request=GroupDeleteSerializer,
        responses=OpenApiTypes.OBJECT,
    )
    def post(self, request, pk, group):
        serializer = GroupDeleteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = group_changes.group_delete(
            actor=request.user,
            cluster=_cluster(pk),
            group=group,
            dry_run=serializer.validated_data["dry_run"],
        )
        return Response(result.to_dict())
