"""Assurance API (viewers): a flow's live RPO, failover readiness and verification (docs/verification.md).

The same reads as the flow page (`controlplane.assurance`, `controlplane.assurance.verification`), so the API and
the UI agree; every figure carries when it was observed."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import assurance
from controlplane.api.serializers import PageQuerySerializer, PartitionPageSerializer
from controlplane.assurance import verification
from controlplane.assurance.models import PartitionVerification
from controlplane.flows import selectors
from controlplane.status import rollup


class TopicRpoSerializer(serializers.Serializer):
    topic = serializers.CharField()
    records_behind = serializers.IntegerField(allow_null=True)
    bytes_behind = serializers.IntegerField(allow_null=True, help_text="value bytes, estimated")
    seconds_behind = serializers.FloatField(allow_null=True)
    observed_at = serializers.DateTimeField(allow_null=True)
    age_s = serializers.FloatField(allow_null=True)
    stale = serializers.BooleanField()


class FlowRpoSerializer(TopicRpoSerializer):
    topic = None
    budget_seconds_behind = serializers.FloatField(source="budget.seconds_behind")
    budget_records_behind = serializers.IntegerField(source="budget.records_behind", allow_null=True)
    over_budget = serializers.BooleanField(allow_null=True, help_text="null while stale or unknown")
    topics = TopicRpoSerializer(many=True)


class ReasonSerializer(serializers.Serializer):
    check = serializers.CharField()
    status = serializers.CharField(help_text="ok, warn, fail, unknown or n/a")
    points = serializers.IntegerField(help_text="what it costs the score")
    message = serializers.CharField()


class ReadinessSerializer(serializers.Serializer):
    score = serializers.IntegerField(help_text="0-100")
    threshold = serializers.FloatField(help_text="readiness_low fires below it")
    below_threshold = serializers.BooleanField()
    applies = serializers.BooleanField(
        help_text="false while a failover may not start (failing over, failed over, migrated, disabled): "
        "the score then judges nothing"
    )
    not_applicable = serializers.CharField(help_text="why the score judges nothing; empty when it applies")
    computed_at = serializers.DateTimeField()
    reasons = ReasonSerializer(many=True, source="readiness.reasons")


class PartitionVerificationSerializer(serializers.ModelSerializer):
    class Meta:
        model = PartitionVerification
        fields = [
            "topic", "partition", "remote_topic", "status", "reason", "verified_from", "verified_up_to",
            "mismatch_offset", "records_verified", "ranges_verified", "ranges_sampled", "bytes_read",
            "last_digest", "sync_upstream", "sync_downstream", "checked_at", "verified_at",
        ]  # fmt: skip


class VerificationPageSerializer(PartitionPageSerializer):
    """A page of a flow's verification rows (`verification.verification_page`), worst first."""

    results = PartitionVerificationSerializer(
        source="partitions",
        many=True,
        help_text="mismatches first, then unverifiable, pending, ok; then topic, partition",
    )


class BacklogSerializer(serializers.Serializer):
    """What the flow's last verification run left waiting (`verification.BacklogSeen`), with its age."""

    partitions_waiting = serializers.IntegerField(help_text="partitions with records no run verified yet")
    records_waiting = serializers.IntegerField(help_text="their replicated, synced source offsets")
    oldest_look_at = serializers.DateTimeField(
        allow_null=True, help_text="the least recent look at a waiting partition; null: none waits"
    )
    longest_wait_s = serializers.FloatField(
        source="wait_s",
        allow_null=True,
        help_text="seconds since that look; over 600: the verifier is behind",
    )
    behind = serializers.BooleanField(help_text="some waiting partition went 10 minutes without a look")
    observed_at = serializers.DateTimeField()
    age_s = serializers.FloatField()
    stale = serializers.BooleanField(help_text="the verifier has not stored it for 2.5 minutes")


class VerificationSerializer(serializers.Serializer):
    status = serializers.CharField(help_text="ok, mismatch or pending")
    checked_at = serializers.DateTimeField(allow_null=True)
    verified_at = serializers.DateTimeField(allow_null=True)
    records_verified = serializers.IntegerField()
    partition_count = serializers.IntegerField(help_text="partitions with a verification row")
    verified_count = serializers.IntegerField(help_text="partitions with a verified range")
    mismatch_count = serializers.SerializerMethodField(help_text="partitions whose copy differs")
    backlog = BacklogSerializer(allow_null=True, help_text="null until a verification run stored one")
    partitions = serializers.SerializerMethodField(
        help_text="one page of the flow's partitions, as the query asks (page, page_size)"
    )

    def get_mismatch_count(self, summary) -> int:
        return len(summary.mismatches)

    @extend_schema_field(VerificationPageSerializer)
    def get_partitions(self, summary) -> dict:
        return VerificationPageSerializer(self.context["page"], context=self.context).data


def _status(pk: int):
    return rollup.flow_status(flow=get_object_or_404(selectors.flow_list(), pk=pk))


class FlowRpoView(APIView):
    @extend_schema(
        summary="A flow's live RPO: what a failover now would lose, per topic", responses=FlowRpoSerializer
    )
    def get(self, request, pk: int):
        status = _status(pk)
        rpo = assurance.flow_rpo(status, budget=assurance.rpo_budget_of(flow=status.flow))
        return Response(FlowRpoSerializer(rpo).data)


class FlowReadinessView(APIView):
    @extend_schema(
        summary="A flow's failover readiness score with its reasons", responses=ReadinessSerializer
    )
    def get(self, request, pk: int):
        return Response(ReadinessSerializer(assurance.flow_readiness(_status(pk))).data)


class FlowVerificationView(APIView):
    @extend_schema(
        summary="A flow's continuous verification, rolled up, and one page of its partitions (worst first)",
        parameters=[PageQuerySerializer],
        responses=VerificationSerializer,
    )
    def get(self, request, pk: int):
        flow = get_object_or_404(selectors.flow_list(), pk=pk)
        query = PageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        context = {
            "request": request,
            "page": verification.verification_page(flow=flow, **query.validated_data),
        }
        return Response(
            VerificationSerializer(verification.verification_status(flow=flow), context=context).data
        )
