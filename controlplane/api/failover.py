"""Failover API: the plan (any role), execute and failback (operator; the service checks and audits).

Execute and failback let every authenticated user reach the service, which refuses (403) anyone below
operator and records the refusal: every attempt is in the audit log.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import failover, selectors
from controlplane.models import Flow

MAX_TIMEOUT_S = 3600


def _flow(pk: str) -> Flow:
    return get_object_or_404(selectors.flow_list(), pk=pk)


class FailoverRequestSerializer(serializers.Serializer):
    groups = serializers.ListField(child=serializers.CharField(max_length=255), allow_empty=False)
    confirm = serializers.CharField(allow_blank=True, help_text="the flow's name, e.g. A->B")
    force = serializers.BooleanField(default=False, help_text="go on despite failed checks")
    timeout_s = serializers.FloatField(
        default=failover.DEFAULT_DRAIN_TIMEOUT_S, min_value=0, max_value=MAX_TIMEOUT_S
    )


class FailbackRequestSerializer(serializers.Serializer):
    confirm = serializers.CharField(allow_blank=True, help_text="the failed-over flow's name, e.g. A->B")
    groups = serializers.ListField(
        child=serializers.CharField(max_length=255),
        required=False,
        help_text="default: the groups the last failover moved",
    )
    force = serializers.BooleanField(default=False)


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
        summary="Fail the flow over (operator): drain, pause, write translated offsets on the target",
        request=FailoverRequestSerializer,
        responses=OpenApiTypes.OBJECT,
    )
    def post(self, request, pk: str):
        serializer = FailoverRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = failover.failover_execute(actor=request.user, flow=_flow(pk), **serializer.validated_data)
        return Response(result.to_dict())


class FailbackView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Fail back (operator): start the reverse flow, move the groups' offsets back to the source",
        request=FailbackRequestSerializer,
        responses=OpenApiTypes.OBJECT,
    )
    def post(self, request, pk: str):
        serializer = FailbackRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = failover.failback_execute(actor=request.user, flow=_flow(pk), **serializer.validated_data)
        return Response(result.to_dict())
