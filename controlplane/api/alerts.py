"""Alerts API: RPO budgets, alert instances, silences, notification channels (docs/alerts.md)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import alerts, assurance
from controlplane.alerts import notifications
from controlplane.alerts.models import Alert, AlertSilence, ChannelKind, NotificationChannel
from controlplane.api.fields import FiniteFloatField, WholeNumberField
from controlplane.api.permissions import request_role
from controlplane.api.views import ID_PATTERN
from controlplane.core.bounds import MAX_SECONDS
from controlplane.core.roles import Role
from controlplane.flows.models import Flow


class RpoBudgetSerializer(serializers.Serializer):
    seconds_behind = FiniteFloatField(help_text="largest seconds_behind allowed, e.g. 60")
    records_behind = WholeNumberField(
        min_value=None,
        allow_null=True,
        required=False,
        default=None,
        help_text="largest records_behind allowed; null: none",
    )


class RpoBudgetView(APIView):
    """GET (viewer) or PUT (admin) a flow's RPO budget."""

    @extend_schema(summary="Get a flow's RPO budget", responses=RpoBudgetSerializer)
    def get(self, request, pk: int):
        budget = assurance.rpo_budget_of(flow=get_object_or_404(Flow, pk=pk))
        return Response(RpoBudgetSerializer(budget).data)

    @extend_schema(
        summary="Set a flow's RPO budget (admin)", request=RpoBudgetSerializer, responses=RpoBudgetSerializer
    )
    def put(self, request, pk: int):
        flow = get_object_or_404(Flow, pk=pk)
        serializer = RpoBudgetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        budget = assurance.rpo_budget_set(actor=request.user, flow=flow, **serializer.validated_data)
        return Response(RpoBudgetSerializer(budget).data)


class AlertSerializer(serializers.ModelSerializer):
    flow_name = serializers.CharField(source="flow.name", read_only=True)
    rule_title = serializers.CharField(source="get_rule_display", read_only=True)

    class Meta:
        model = Alert
        fields = [
            "id", "flow", "flow_name", "rule", "rule_title", "state", "fired_at", "resolved_at", "figure",
            "fired_figure", "threshold", "unit", "observed_at", "message", "silenced",
        ]  # fmt: skip


@extend_schema_view(
    list=extend_schema(summary="Alerts: firing first, then resolved history (filter: state, flow, rule)"),
    retrieve=extend_schema(summary="Get an alert"),
)
class AlertViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = AlertSerializer
    lookup_value_regex = ID_PATTERN
    filterset_fields = ["state", "flow", "rule"]

    def get_queryset(self):
        return alerts.alert_list()


class SilenceSerializer(serializers.ModelSerializer):
    flow_name = serializers.CharField(source="flow.name", read_only=True, default=None)
    created_by = serializers.CharField(source="created_by.username", read_only=True, default=None)
    duration_s = FiniteFloatField(
        write_only=True, required=False, max_value=MAX_SECONDS, help_text="or expires_at"
    )
    expires_at = serializers.DateTimeField(required=False)
    rule = serializers.CharField(required=False, allow_blank=True, default="", help_text="empty: every rule")
    flow = serializers.PrimaryKeyRelatedField(queryset=Flow.objects.all(), required=False, allow_null=True)
    active = serializers.SerializerMethodField()

    class Meta:
        model = AlertSilence
        fields = [
            "id", "flow", "flow_name", "rule", "expires_at", "duration_s", "reason", "created_by", "created_at",
            "active",
        ]  # fmt: skip
        read_only_fields = ["created_at"]

    def get_active(self, silence) -> bool:
        return silence.expires_at > timezone.now()


@extend_schema_view(
    list=extend_schema(summary="Silences, latest expiry first"),
    create=extend_schema(summary="Silence notifications until an expiry (operator; audited)"),
    retrieve=extend_schema(summary="Get a silence"),
)
class SilenceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    serializer_class = SilenceSerializer
    lookup_value_regex = ID_PATTERN
    action_roles = {"create": Role.OPERATOR, "expire": Role.OPERATOR}

    def get_queryset(self):
        return alerts.silence_list()

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        silence = alerts.silence_create(actor=request.user, **serializer.validated_data)
        return Response(self.get_serializer(silence).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="End a silence now (operator; audited)", request=None)
    @action(detail=True, methods=["post"])
    def expire(self, request, pk=None):
        silence = alerts.silence_expire(actor=request.user, silence=self.get_object())
        return Response(self.get_serializer(silence).data)


class ChannelSerializer(serializers.ModelSerializer):
    kind = serializers.CharField(help_text=f"one of {', '.join(ChannelKind.values)}")
    url = serializers.CharField(
        write_only=True, required=False, help_text="webhook or Slack URL (write-only: it may hold a token)"
    )
    url_hint = serializers.CharField(read_only=True)
    email_to = serializers.ListField(child=serializers.CharField(), required=False)

    class Meta:
        model = NotificationChannel
        fields = [
            "id", "name", "kind", "enabled", "url", "url_hint", "email_to", "failing", "last_error",
            "last_attempt_at", "last_success_at", "created_at",
        ]  # fmt: skip
        read_only_fields = ["failing", "last_error", "last_attempt_at", "last_success_at", "created_at"]
        extra_kwargs = {
            "name": {"validators": []},  # uniqueness is the service's, with its message
            "last_error": {
                "help_text": "why the last delivery failed (operators and admins; empty for viewers)"
            },
        }

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        role = request_role(request) if request else None
        if role is None or role < notifications.DELIVERY_DETAIL_ROLE:
            data["last_error"] = ""
        return data


@extend_schema_view(
    list=extend_schema(summary="Notification channels (URLs masked)"),
    create=extend_schema(summary="Add a channel (admin); the URL is write-only"),
    retrieve=extend_schema(summary="Get a channel"),
    update=extend_schema(summary="Replace a channel (admin)"),
    partial_update=extend_schema(summary="Change a channel (admin); omit url to keep it"),
    destroy=extend_schema(summary="Delete a channel (admin)"),
)
class ChannelViewSet(viewsets.ModelViewSet):
    serializer_class = ChannelSerializer
    lookup_value_regex = ID_PATTERN
    queryset = NotificationChannel.objects.all()

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        channel = notifications.channel_save(actor=request.user, **serializer.validated_data)
        return Response(self.get_serializer(channel).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        channel = self.get_object()
        serializer = self.get_serializer(channel, data=request.data, partial=kwargs.get("partial", False))
        serializer.is_valid(raise_exception=True)
        channel = notifications.channel_save(actor=request.user, channel=channel, **serializer.validated_data)
        return Response(self.get_serializer(channel).data)

    def destroy(self, request, *args, **kwargs):
        notifications.channel_delete(actor=request.user, channel=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(summary="Send a test notification (admin); 202, delivered by a worker", request=None)
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        notification = notifications.channel_test(actor=request.user, channel=self.get_object())
        return Response({"notification": notification.pk, "state": notification.state}, status=202)
