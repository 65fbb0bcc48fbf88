"""Take over a flow from a running MM2 (an MM2 import step): POST with `dry_run` true (the default) reads
where each source partition resumes; with `dry_run` false it stores those positions. Every authenticated
user reaches the service, which refuses (403) anyone below operator and audits the refusals of an apply."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import selectors, takeover
from replication.takeover import MM2_SOURCE_CONNECTOR


class TakeoverRequestSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField(
        default=True, help_text="read only (the default); false stores the positions"
    )
    offsets_topic = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=249,
        help_text="MM2's offset.storage.topic on the target (default mm2-offsets.<source>.internal)",
    )
    connector = serializers.CharField(
        required=False,
        default=MM2_SOURCE_CONNECTOR,
        max_length=249,
        help_text="the MirrorSourceConnector's name",
    )
    mm2_source_alias = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=100,
        help_text="the source cluster's alias in MM2's file, when it differs from the flow's",
    )


class Mm2TakeoverView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Take the flow over from a stopped MM2 (operator): the dry run shows per partition where "
        "replication resumes; dry_run=false stores those positions (the flow must be paused or disabled)",
        request=TakeoverRequestSerializer,
        responses={
            200: OpenApiTypes.OBJECT,
            409: OpenApiResponse(OpenApiTypes.OBJECT, description="the flow replicates: pause it first"),
            502: OpenApiResponse(OpenApiTypes.OBJECT, description="a cluster did not answer"),
        },
    )
    def post(self, request, pk: str):
        serializer = TakeoverRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        flow = get_object_or_404(selectors.flow_list(), pk=pk)
        result = takeover.mm2_takeover(actor=request.user, flow=flow, **serializer.validated_data)
        return Response(result.to_dict())
