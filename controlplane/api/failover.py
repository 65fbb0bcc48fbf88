"""Failover API: the plan (any role); failover, failback, drill and cutover requests (operator), which
queue an `Operation` and answer 202 with its URL; the operations themselves (any role).

These requests let every authenticated user reach the service, which refuses (403) anyone below
operator and records the refusal: every attempt is in the audit log. A flow with an active operation
answers 409 with that operation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from controlplane import operations
from controlplane.api.fields import FiniteFloatField
from controlplane.flows import selectors
from controlplane.flows.models import Flow
from controlplane.operations import cutover, drills, failover
from controlplane.operations.models import (
    WAITS_OF_KIND,
    DrillPartitionResult,
    Operation,
    OperationGroupResult,
    OperationKind,
)


def _flow(pk: str) -> Flow:
    return get_object_or_404(selectors.flow_list(), pk=pk)


def drain_timeout(default: float = operations.DEFAULT_DRAIN_TIMEOUT_S) -> FiniteFloatField:
    return FiniteFloatField(
        default=default,
        min_value=0,
        max_value=operations.MAX_DRAIN_TIMEOUT_S,
        help_text="the longest drain (s): past it the operation gives up, or, forced, goes on",
    )


@extend_schema_serializer(deprecate_fields=["timeout_s"])
class WaitsSerializer(serializers.Serializer):
    """A request of `kind` with a field per wait it has (`WAITS_OF_KIND`), and `timeout_s`, the one number
    of earlier releases (deprecated, removed in the next release): it sets each wait of the kind it meant
    that the request does not name."""

    kind: str

    timeout_s = FiniteFloatField(
        required=False,
        min_value=0,
        max_value=operations.MAX_DRAIN_TIMEOUT_S,
        help_text="deprecated: the waits' one number of earlier releases; give them by name",
    )

    def validate(self, attrs: dict) -> dict:
        alias = attrs.pop("timeout_s", None)
        if alias is not None:
            attrs |= {wait: alias for wait in WAITS_OF_KIND[self.kind] if wait not in self.initial_data}
        return attrs


class FailoverRequestSerializer(WaitsSerializer):
    kind = OperationKind.FAILOVER
    groups = serializers.ListField(child=serializers.CharField(max_length=255), allow_empty=False)
    confirm = serializers.CharField(allow_blank=True, help_text="the flow's name, e.g. A->B")
    force = serializers.BooleanField(
        default=False, help_text="go on despite failed checks or a drain timeout"
    )
    drain_timeout_s = drain_timeout()


class FailbackRequestSerializer(WaitsSerializer):
    kind = OperationKind.FAILBACK
    confirm = serializers.CharField(allow_blank=True, help_text="the failed-over flow's name, e.g. A->B")
    groups = serializers.ListField(
        child=serializers.CharField(max_length=255),
        required=False,
        help_text="default: the groups the last failover moved",
    )
    force = serializers.BooleanField(default=False, help_text="go on despite a drain timeout")
    drain_timeout_s = drain_timeout()


class DrillRequestSerializer(WaitsSerializer):
    kind = OperationKind.DRILL
    groups = serializers.ListField(child=serializers.CharField(max_length=255), allow_empty=False)
    drain_timeout_s = drain_timeout(drills.DEFAULT_DRILL_DRAIN_TIMEOUT_S)
    record_wait_s = FiniteFloatField(
        default=drills.DEFAULT_DRILL_WAIT_S,
        min_value=0.1,
        max_value=drills.MAX_DRILL_WAIT_S,
        help_text="how long to wait (s) for the copy of a group's next record still on its way, and for "
        "the offset syncs to reach the group's offset",
    )


class CutoverRequestSerializer(WaitsSerializer):
    kind = OperationKind.CUTOVER
    confirm = serializers.CharField(allow_blank=True, help_text="the flow's name, e.g. A->B")
    dry_run = serializers.BooleanField(default=False, help_text="check every step, write nothing")
    fence_s = FiniteFloatField(
        default=cutover.DEFAULT_FENCE_S,
        min_value=0.1,
        max_value=cutover.MAX_FENCE_S,
        help_text="how long the source's end offsets must stay still (producers stopped)",
    )
    fence_timeout_s = FiniteFloatField(
        default=cutover.DEFAULT_FENCE_TIMEOUT_S,
        min_value=0.1,
        max_value=cutover.MAX_FENCE_TIMEOUT_S,
        help_text="how long to wait (s) for the source to stay still for fence_s before refusing",
    )
    drain_timeout_s = drain_timeout()


class DrillPartitionResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = DrillPartitionResult
        fields = [
            "group",
            "topic",
            "partition",
            "remote_topic",
            "source_offset",
            "target_offset",
            "offset_sync",
            "outcome",
            "reason",
            "source_record",
            "target_record",
        ]
        read_only_fields = fields


class OperationGroupResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = OperationGroupResult
        fields = ["group", "outcome", "written", "topics", "detail"]
        read_only_fields = fields


class DrainSerializer(serializers.Serializer):
    partitions = serializers.SerializerMethodField(help_text="partitions the drain waits for")
    started_at = serializers.DateTimeField(source="drain_started_at")
    observed_at = serializers.DateTimeField(
        source="drain_observed_at", help_text="when the figures were read"
    )
    records_at_start = serializers.IntegerField(source="drain_records_at_start")
    records_remaining = serializers.IntegerField(source="drain_records_remaining")
    partition_count_remaining = serializers.IntegerField(source="drain_partition_count_remaining")
    partitions_remaining = serializers.ListField(
        source="drain_partitions_remaining", child=serializers.CharField()
    )
    done = serializers.BooleanField(source="drain_done")

    def get_partitions(self, operation: Operation) -> int:
        return len(operation.drain_partitions)


@extend_schema_serializer(deprecate_fields=["timeout_s"])
class OperationSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    timeout_s = serializers.SerializerMethodField(
        help_text="deprecated: the kind's first wait (a drill's record_wait_s, else its drain or client "
        "timeout); read the waits by name"
    )
    flow_name = serializers.CharField(source="flow.name", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    reverse_flow_name = serializers.SerializerMethodField()
    lease_stale = serializers.SerializerMethodField(
        help_text="its worker stopped renewing: another resumes it"
    )
    drain = serializers.SerializerMethodField()
    group_results = OperationGroupResultSerializer(many=True, read_only=True)
    drill_results = DrillPartitionResultSerializer(many=True, read_only=True)

    class Meta:
        model = Operation
        fields = [
            "id",
            "url",
            "kind",
            "flow",
            "flow_name",
            "requested_by",
            "groups",
            "force",
            "drain_timeout_s",
            "fence_timeout_s",
            "record_wait_s",
            "client_timeout_s",
            "timeout_s",
            "phase",
            "outcome",
            "active",
            "progress",
            "message",
            "error",
            "requested_at",
            "dispatched_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "worker",
            "attempts",
            "lease_stale",
            "previous_state",
            "source_reachable",
            "records_at_risk",
            "plan",
            "failover",
            "reverse_flow",
            "reverse_flow_name",
            "reverse_flow_created",
            "topics_back",
            "drain",
            "group_results",
            "dry_run",
            "fence_s",
            "result",
            "drill_results",
        ]
        read_only_fields = fields

    def get_url(self, operation: Operation) -> str:
        return reverse("operation-detail", args=[operation.pk], request=self.context.get("request"))

    def get_timeout_s(self, operation: Operation) -> float | None:
        return getattr(operation, WAITS_OF_KIND[operation.kind][0])

    def get_reverse_flow_name(self, operation: Operation) -> str | None:
        return operation.reverse_flow.name if operation.reverse_flow_id else None

    def get_lease_stale(self, operation: Operation) -> bool:
        return operations.lease_stale(operation)

    @extend_schema_field(DrainSerializer(allow_null=True))
    def get_drain(self, operation: Operation) -> dict | None:
        return DrainSerializer(operation).data if operation.drain_partitions else None


def accepted(request, operation: Operation) -> Response:
    """202 with the operation and its URL (the Location header too)."""
    body = OperationSerializer(operation, context={"request": request}).data
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


def queue_operation(
    request, pk: str, *, kind: str, serializer_class, queue: Callable[..., Operation]
) -> Response:
    """The role first (a refusal audited, whatever the body holds), then validate and queue through
    `queue(actor=, flow=, **fields)`: 202 with the operation, 409 with the active one (the services refuse
    and audit the rest). Failover, failback, drills, cutovers, takeovers."""
    flow = _flow(pk)
    operations.require_operator(actor=request.user, kind=kind, flow=flow)
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    try:
        operation = queue(actor=request.user, flow=flow, **serializer.validated_data)
    except operations.OperationActive as exc:
        body = OperationSerializer(exc.operation, context={"request": request}).data
        return Response({"detail": str(exc), "operation": body}, status=status.HTTP_409_CONFLICT)
    return accepted(request, operation)


REQUEST_RESPONSES = {
    202: OperationSerializer,
    409: OpenApiResponse(
        OpenApiTypes.OBJECT, description="the flow's state forbids it, or an operation runs"
    ),
}


class FailoverPlanView(APIView):
    @extend_schema(
        summary="Failover plan: offsets per group and partition, records at risk, checklist (read-only)",
        parameters=[
            OpenApiParameter("groups", str, description="comma-separated groups (default: every group)")
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, pk: str):
        raw = request.query_params.get("groups")
        groups = [g for g in raw.split(",") if g.strip()] if raw else None
        plan = failover.failover_plan(flow=_flow(pk), groups=groups, actor=request.user)
        return Response(plan.to_dict())


class FailoverExecuteView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Fail the flow over (operator): queues the operation (drain, write the groups' offsets on "
        "the target); 202 with its URL",
        request=FailoverRequestSerializer,
        responses=REQUEST_RESPONSES,
    )
    def post(self, request, pk: str):
        queue = partial(operations.operation_request, kind=OperationKind.FAILOVER)
        return queue_operation(
            request, pk, kind=OperationKind.FAILOVER, serializer_class=FailoverRequestSerializer, queue=queue
        )


class FailbackView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Fail back (operator): queues the operation (reverse flow, drain back, move the groups' "
        "offsets back to the source); 202 with its URL",
        request=FailbackRequestSerializer,
        responses=REQUEST_RESPONSES,
    )
    def post(self, request, pk: str):
        queue = partial(operations.operation_request, kind=OperationKind.FAILBACK)
        return queue_operation(
            request, pk, kind=OperationKind.FAILBACK, serializer_class=FailbackRequestSerializer, queue=queue
        )


class DrillView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Drill a failover (operator): queues a drill (shadow groups on the target at the translated "
        "offsets, next records compared by content, RPO and RTO measured; production untouched); 202",
        request=DrillRequestSerializer,
        responses=REQUEST_RESPONSES,
    )
    def post(self, request, pk: str):
        return queue_operation(
            request,
            pk,
            kind=OperationKind.DRILL,
            serializer_class=DrillRequestSerializer,
            queue=drills.drill_request,
        )


class CutoverView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Cut the flow over for good (operator): queues the cutover (lag, fence, drain, verify, "
        "exact offsets for every group, migrated, clients to switch), or its dry run; 202 with its URL",
        request=CutoverRequestSerializer,
        responses=REQUEST_RESPONSES,
    )
    def post(self, request, pk: str):
        return queue_operation(
            request,
            pk,
            kind=OperationKind.CUTOVER,
            serializer_class=CutoverRequestSerializer,
            queue=cutover.cutover_request,
        )


@extend_schema_view(
    list=extend_schema(summary="Operations (failover, failback), newest first: phase, progress, outcome"),
    retrieve=extend_schema(summary="One operation: phase, progress, drain, per-group results, outcome"),
)
class OperationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = operations.operation_list()
    serializer_class = OperationSerializer
    filterset_fields = ["flow", "kind", "phase", "outcome", "active"]
    lookup_value_regex = r"[0-9]{1,18}"
