"""Thin API views: parse, call one service or selector, serialize."""

from __future__ import annotations

import time

import django_filters
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import core
from controlplane.api import serializers as s
from controlplane.api.permissions import request_role
from controlplane.api.shared import shared_response
from controlplane.core.bounds import ID_PATTERN
from controlplane.core.roles import Role
from controlplane.flows import mm2, pools, selectors, services
from controlplane.flows.models import Cluster, Flow, FlowState, SecurityProtocol
from controlplane.status import activity, partitions, rollup

# Ids are BigAutoField: longer numbers cannot exist (and PostgreSQL would refuse them), so they are 404.


class ClusterFilter(django_filters.FilterSet):
    security_protocol = django_filters.ChoiceFilter(choices=SecurityProtocol.choices)

    class Meta:
        model = Cluster
        fields = {"alias": ["exact", "icontains"]}


@extend_schema_view(
    list=extend_schema(summary="List clusters"),
    create=extend_schema(summary="Create a cluster (admin); secrets are write-only"),
    retrieve=extend_schema(summary="Get a cluster"),
    update=extend_schema(summary="Replace a cluster's settings (admin)"),
    partial_update=extend_schema(summary="Change some of a cluster's settings (admin)"),
    destroy=extend_schema(summary="Delete a cluster no flow uses (admin)"),
)
class ClusterViewSet(viewsets.ModelViewSet):
    queryset = selectors.cluster_list()
    serializer_class = s.ClusterSerializer
    filterset_class = ClusterFilter
    ordering_fields = ["alias", "created_at", "updated_at"]
    lookup_value_regex = ID_PATTERN
    action_roles = {"check": Role.OPERATOR}

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        columns, secrets = serializer.split()
        cluster = services.cluster_create(actor=request.user, **columns, secrets=secrets)
        return Response(self.get_serializer(cluster).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        cluster = self.get_object()
        serializer = self.get_serializer(cluster, data=request.data, partial=kwargs.get("partial", False))
        serializer.is_valid(raise_exception=True)
        columns, secrets = serializer.split()
        cluster = services.cluster_update(
            actor=request.user, cluster=cluster, changes=columns, secret_changes=secrets
        )
        return Response(self.get_serializer(cluster).data)

    def destroy(self, request, *args, **kwargs):
        services.cluster_delete(actor=request.user, cluster=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Connect to the cluster and report brokers, topics and latency, or the precise failure",
        request=None,
        responses=s.ClusterCheckSerializer,
    )
    @action(detail=True, methods=["post"])
    def check(self, request, pk=None):
        result = selectors.cluster_check(cluster=self.get_object(), actor=request.user)
        return Response(s.ClusterCheckSerializer(result).data)


class FlowFilter(django_filters.FilterSet):
    source = django_filters.CharFilter(field_name="source__alias")
    target = django_filters.CharFilter(field_name="target__alias")
    state = django_filters.ChoiceFilter(choices=FlowState.choices)

    class Meta:
        model = Flow
        fields = ["source", "target", "enabled", "state"]


@extend_schema_view(
    list=extend_schema(summary="List flows"),
    create=extend_schema(summary="Create a flow (admin); refused with an explanation if it closes a loop"),
    retrieve=extend_schema(summary="Get a flow"),
    update=extend_schema(summary="Replace a flow's settings (admin)"),
    partial_update=extend_schema(summary="Change some of a flow's settings (admin)"),
    destroy=extend_schema(summary="Delete a flow (admin)"),
)
class FlowViewSet(viewsets.ModelViewSet):
    queryset = selectors.flow_list()
    serializer_class = s.FlowSerializer
    filterset_class = FlowFilter
    ordering_fields = ["created_at", "updated_at", "state"]
    lookup_value_regex = ID_PATTERN
    action_roles = {"pause": Role.OPERATOR, "resume": Role.OPERATOR}

    def get_queryset(self):
        # What the list and the status show of the clusters: their aliases.
        return selectors.flow_list(cluster_aliases_only=self.action in ("list", "status"))

    def list(self, request, *args, **kwargs):
        """One page of flows, shared by every client asking for it within a moment of each other until the
        configuration changes (`core.microcache`); `Age` says how old it is, in seconds."""
        return shared_response(
            self, request, "flows-api", lambda: super(FlowViewSet, self).list(request, *args, **kwargs).data
        )

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        flow = services.flow_create(actor=request.user, **serializer.validated_data)
        return Response(self.get_serializer(flow).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        flow = self.get_object()
        serializer = self.get_serializer(flow, data=request.data, partial=kwargs.get("partial", False))
        serializer.is_valid(raise_exception=True)
        flow = services.flow_update(actor=request.user, flow=flow, **serializer.validated_data)
        return Response(self.get_serializer(flow).data)

    def destroy(self, request, *args, **kwargs):
        services.flow_delete(actor=request.user, flow=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(summary="Pause the flow (operator); idempotent", request=None, responses=s.FlowSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        flow = services.flow_pause(actor=request.user, flow=self.get_object())
        return Response(self.get_serializer(flow).data)

    @extend_schema(summary="Resume the flow (operator); idempotent", request=None, responses=s.FlowSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        flow = services.flow_resume(actor=request.user, flow=self.get_object())
        return Response(self.get_serializer(flow).data)

    @extend_schema(
        summary="The source cluster's topics: replicated ones with their remote names, excluded ones with why",
        responses={
            200: s.TopicSerializer(many=True),
            502: OpenApiResponse(description="the source cluster did not answer"),
        },
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def topics(self, request, pk=None):
        topics = selectors.flow_topics(flow=self.get_object())
        return Response(s.TopicSerializer(topics, many=True).data)

    @extend_schema(
        summary="The flow's live roll-up, one page of its partitions (worst first; search by topic, filter "
        "by state) and recent events",
        parameters=[s.PartitionQuerySerializer],
        responses=s.FlowStatusSerializer,
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def status(self, request, pk=None):
        found = selectors.flow_shown(pk=int(pk))  # `get_object`'s read, compiled once per process
        if not found:
            raise Http404("No flow matches the given query.")
        flow = found[0]
        self.check_object_permissions(request, flow)

        def build():
            query = s.PartitionQuerySerializer(data=request.query_params)
            query.is_valid(raise_exception=True)
            status = rollup.flow_status(flow=flow)
            page = partitions.partition_page(
                flow=flow, budget=status.budget, tasks=status.tasks, **query.validated_data
            )
            context = {"role": request_role(request), "request": request, "partition_page": page}
            return s.FlowStatusSerializer(status, context=context).data

        # Shared by its askers for a moment, as the flows list: the on-call team watching one flow.
        return shared_response(self, request, "flow-status", build)


class LiveStatusView(APIView):
    @extend_schema(
        summary="Every flow's live roll-up with its age (stale is never ok), and whether workers replicate",
        responses=s.LiveStatusSerializer,
    )
    def get(self, request):
        return Response(s.LiveStatusSerializer(activity.live_status()).data)


class PoolListView(APIView):
    @extend_schema(
        summary="Worker pools: their queue, live workers (age, slices/s, leases held) and pinned flows; "
        "flows_waiting lists the flows pinned to a pool no live worker consumes",
        responses=s.PoolSerializer(many=True),
    )
    def get(self, request):
        now = time.time()
        return Response(s.PoolSerializer(pools.pool_list(), many=True, context={"now": now}).data)


class ApiTokenRotateView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Replace your API token (any signed-in user, for themselves): the new key is in this answer "
        "only (tokens are stored hashed); the old one stops working; it expires after "
        "MIRRORPLANE_API_TOKEN_TTL_DAYS",
        request=None,
        responses=s.ApiTokenSerializer,
    )
    def post(self, request):
        key, token = core.api_token_rotate(user=request.user, actor=request.user)
        return Response(
            s.ApiTokenSerializer({"token": key, "prefix": token.prefix, "expires_at": token.expires_at}).data,
            status=status.HTTP_201_CREATED,
        )


class Mm2ImportView(APIView):
    @extend_schema(
        summary="Import an mm2.properties text or a Strimzi KafkaMirrorMaker2 resource (YAML) (admin); "
        "dry_run shows the changes without applying them",
        request=s.Mm2ImportRequestSerializer,
        responses=s.Mm2ImportResultSerializer,
    )
    def post(self, request):
        serializer = s.Mm2ImportRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = mm2.mm2_import(actor=request.user, **serializer.validated_data, source_name="upload")
        return Response(s.Mm2ImportResultSerializer(result).data)


class PlainTextRenderer(JSONRenderer):
    """Lets clients ask for text/plain; the export view answers with its own text response."""

    media_type = "text/plain"
    format = "txt"


class StrimziYamlRenderer(PlainTextRenderer):
    """`?format=strimzi` or `Accept: application/yaml`: the export as KafkaMirrorMaker2 resources."""

    media_type = "application/yaml"
    format = "strimzi"


class Mm2ExportView(APIView):
    renderer_classes = [JSONRenderer, PlainTextRenderer, StrimziYamlRenderer]

    @extend_schema(
        summary="Every cluster and flow as mm2.properties (secrets as ${env:...} placeholders), or with "
        "format=strimzi as Strimzi KafkaMirrorMaker2 resources (secrets as Secret references)",
        responses={(200, "text/plain"): OpenApiTypes.STR, (200, "application/yaml"): OpenApiTypes.STR},
    )
    def get(self, request):
        if request.accepted_renderer.format == StrimziYamlRenderer.format:
            return HttpResponse(
                selectors.strimzi_export(role=request_role(request)),
                content_type="application/yaml; charset=utf-8",
            )
        return HttpResponse(selectors.mm2_export(), content_type="text/plain; charset=utf-8")


@extend_schema_view(
    list=extend_schema(summary="Audit events, newest first"),
    retrieve=extend_schema(summary="One audit event"),
)
class AuditEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = core.audit_list()
    serializer_class = s.AuditEventSerializer
    filterset_class = core.AuditFilter
    ordering_fields = ["at"]
    lookup_value_regex = ID_PATTERN
