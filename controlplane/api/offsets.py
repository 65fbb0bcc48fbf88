"""Offset mapping API: translate (topic, partition, offset) items between a flow's source and target,
in bulk, exactly, each answer with the offset sync it rests on or a per-item error. A read: any role
(viewer up) may call it, although it is a POST (a batch does not fit a query string)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.fields import WholeNumberField
from controlplane.browse import offset_mapping
from controlplane.core.roles import Role
from controlplane.flows import selectors
from replication.offset_mapping import Direction, OffsetQuery


class OffsetItemSerializer(serializers.Serializer):
    topic = serializers.CharField(
        max_length=249, help_text="the source topic, or the remote topic from the target"
    )
    partition = WholeNumberField(max_value=2**31 - 1)
    offset = WholeNumberField(help_text="the next offset to read (a committed offset)")


class OffsetMappingRequestSerializer(serializers.Serializer):
    direction = serializers.ChoiceField(
        choices=[d.value for d in Direction],
        default=Direction.SOURCE_TO_TARGET.value,
        help_text="source_to_target (failover) or target_to_source (failback)",
    )
    offsets = OffsetItemSerializer(many=True, help_text="at most OFFSET_MAPPING_MAX_ITEMS items")


class OffsetMappingView(APIView):
    action = "translate"  # a read, whatever its method: RolePermission lets viewers in
    action_roles = {"translate": Role.VIEWER}

    @extend_schema(
        summary="Translate offsets between the flow's source and target, in bulk, exactly, with the offset "
        "sync each answer rests on (any role)",
        request=OffsetMappingRequestSerializer,
        responses=OpenApiTypes.OBJECT,
    )
    def post(self, request, pk: str):
        flow = get_object_or_404(selectors.flow_list(), pk=pk)
        serializer = OffsetMappingRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        queries = [OffsetQuery(item["topic"], item["partition"], item["offset"]) for item in data["offsets"]]
        answers = offset_mapping.offsets_map(
            flow=flow, actor=request.user, direction=data["direction"], queries=queries
        )
        failed = sum(1 for answer in answers if answer.error is not None)
        return Response(
            {
                "flow": flow.name,
                "direction": data["direction"],
                "observed_at": timezone.now(),
                "translated": len(answers) - failed,
                "failed": failed,
                "offsets": [answer.to_dict() for answer in answers],
            }
        )
