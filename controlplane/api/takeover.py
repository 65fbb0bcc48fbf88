"""Take over from a stopped MM2 (an MM2 import step): POST queues the operation (kind `takeover`) and
answers 202 with its URL (Location too); with `dry_run` true (the default) it reads per source partition
where replication resumes, with `dry_run` false (best with `from_dry_run`, the finished dry run) it
stores those positions. GET the operation (/api/v1/operations/{id}/) for its progress and, when it has
ended, its `result` (`plan`, and for an apply `written`). Every authenticated user reaches the service,
which refuses (403) anyone below operator and audits every refusal; 409 while the flow replicates (for
an apply) or another operation of the flow is active (with that operation)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from controlplane.api.failover import REQUEST_RESPONSES, queue_operation
from controlplane.api.fields import WholeNumberField
from controlplane.operations import takeover
from controlplane.operations.models import OperationKind
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
    from_dry_run = WholeNumberField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        help_text="apply: the finished dry run to store (its inputs are used; refused if its resume points "
        "no longer hold)",
    )


class Mm2TakeoverView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Take the flow over from a stopped MM2 (operator): queues the dry run (per partition where "
        "replication resumes) or, dry_run=false, the apply that stores those positions (the flow paused or "
        "disabled); 202 with the operation's URL",
        request=TakeoverRequestSerializer,
        responses=REQUEST_RESPONSES,
    )
    def post(self, request, pk: str):
        return queue_operation(
            request,
            pk,
            kind=OperationKind.TAKEOVER,
            serializer_class=TakeoverRequestSerializer,
            queue=takeover.takeover_request,
        )
