"""Reports API: ask for a run (operator), follow runs, read report rows as JSON (any role)."""

from __future__ import annotations

import datetime

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import reports
from controlplane.api.fields import WholeNumberField
from controlplane.core.roles import Role
from controlplane.reports.models import ReportDataset, ReportRun, ReportTrigger


class ReportRunSerializer(serializers.ModelSerializer):
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = ReportRun
        fields = [
            "id",
            "state",
            "trigger",
            "requested_by",
            "requested_at",
            "dispatched_at",
            "started_at",
            "finished_at",
            "updated_at",
            "progress",
            "stage",
            "error",
            "samples_read",
            "partitions_read",
            "rows_stored",
        ]
        read_only_fields = fields


class UtcDateTimeField(serializers.DateTimeField):
    """Any ISO 8601 offset, read as UTC (PostgreSQL refuses offsets beyond 15:59)."""

    def to_internal_value(self, value):
        parsed = super().to_internal_value(value)
        try:
            return parsed.astimezone(datetime.UTC)
        except OverflowError:
            raise serializers.ValidationError("date-time out of range") from None


class ReportQuerySerializer(serializers.Serializer):
    flow = WholeNumberField(required=False, help_text="a flow id")
    since = UtcDateTimeField(required=False, help_text="windows starting at or after (ISO 8601)")
    until = UtcDateTimeField(required=False, help_text="windows starting before (ISO 8601)")
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=reports.REPORT_ROWS_LIMIT,
        default=reports.REPORT_ROWS_LIMIT,
        help_text="the newest rows at most",
    )

    def validate(self, attrs):
        since, until = attrs.get("since"), attrs.get("until")
        if since and until and since >= until:
            raise serializers.ValidationError({"until": ["must be after since"]})
        return attrs


class ReportRowsSerializer(serializers.Serializer):
    dataset = serializers.ChoiceField(choices=ReportDataset.choices)
    count = serializers.IntegerField()
    rows = serializers.ListField(child=serializers.DictField(), help_text="the job's columns per dataset")


@extend_schema_view(
    list=extend_schema(summary="Report runs, newest first: state and progress"),
    retrieve=extend_schema(summary="One report run: state, progress, stage, error, rows stored"),
)
class ReportRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = reports.report_run_list()
    serializer_class = ReportRunSerializer
    filterset_fields = ["state", "trigger"]
    lookup_value_regex = r"[0-9]{1,18}"
    action_roles = {"run": Role.OPERATOR}

    @extend_schema(
        summary="Run the reports now (operator): queues a run; 409 while another is queued or running",
        request=None,
        responses={
            202: ReportRunSerializer,
            409: OpenApiResponse(OpenApiTypes.OBJECT, description="a run is active: detail and the run"),
        },
    )
    def run(self, request):
        try:
            run = reports.report_run_request(actor=request.user, trigger=ReportTrigger.USER)
        except reports.ReportRunActive as exc:
            return Response(
                {"detail": str(exc), "run": ReportRunSerializer(exc.run).data},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(ReportRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class ReportRowsView(APIView):
    @extend_schema(
        summary="A report dataset's rows (oldest window first) for a flow and time range",
        parameters=[
            OpenApiParameter(
                "dataset", str, OpenApiParameter.PATH, enum=ReportDataset.values, description="the dataset"
            ),
            ReportQuerySerializer,
        ],
        responses={200: ReportRowsSerializer},
    )
    def get(self, request, dataset: str):
        query = ReportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        rows = reports.report_rows(
            dataset=dataset,
            flow_id=params.get("flow"),
            since=params.get("since"),
            until=params.get("until"),
            limit=params["limit"],
        )
        return Response({"dataset": dataset, "count": len(rows), "rows": rows})
