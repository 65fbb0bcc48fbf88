"""The alert page (viewers read: firing first, then history; channels with their failures; silences),
silences (operators), notification channels (admins). htmx refreshes the live part like the other pages."""

from __future__ import annotations

import time

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from controlplane import alerts
from controlplane.alerts import notifications
from controlplane.alerts.models import AlertRule, AlertSilence, NotificationChannel
from controlplane.core.errors import ServiceValidationError
from controlplane.core.roles import Role
from controlplane.web.access import admin_required, operator_required, viewer_required
from controlplane.web.forms import ChannelForm, SilenceForm
from controlplane.web.listing import Filter, ListSpec, Sort, list_page

HISTORY = 100


HISTORY_LIST = ListSpec(
    sorts=(
        Sort("flow", field="flow__source__alias"),
        Sort("rule"),
        Sort("fired", field="fired_at"),
        Sort("resolved", field="resolved_at"),
    ),
    default_sort="-resolved",
    search_fields=("flow__source__alias", "flow__target__alias", "rule", "message"),
    search_label="Search the history (flow, rule, message)",
    filters=(Filter("rule", "Rule", AlertRule.choices),),
    page_size=HISTORY,
)


def _context(request) -> dict:
    evaluated = alerts.evaluated_at()
    now = timezone.now()
    history = list_page(request, HISTORY_LIST, alerts.alerts_resolved())
    firing = list(alerts.alerts_firing())
    return {
        "firing": firing,
        "silenced_count": sum(alert.silenced for alert in firing),
        "history": history,
        "resolved": history.rows,
        "silences": list(alerts.silence_list()[:50]),
        "channels": list(NotificationChannel.objects.all()),
        "now": now,
        "evaluated_age_s": None if evaluated is None else max(time.time() - evaluated, 0.0),
        "can_silence": request.web_role >= Role.OPERATOR,
        "can_configure": request.web_role >= Role.ADMIN,
        "can_read_delivery": request.web_role >= notifications.DELIVERY_DETAIL_ROLE,
    }


@viewer_required
def alert_page(request):
    context = _context(request)
    context["silence_form"] = SilenceForm()
    return render(request, "web/alerts.html", context)


@viewer_required
def alert_live(request):
    return render(request, "web/_alerts_live.html", _context(request))


@require_POST
@operator_required
def silence_create(request):
    form = SilenceForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            alerts.silence_create(
                actor=request.user,
                flow=data["flow"],
                rule=data["rule"],
                duration_s=data["duration_h"] * 3600,
                reason=data["reason"],
            )
            messages.success(request, "Silence created.")
            return redirect("web:alerts")
        except ServiceValidationError as exc:
            form.add_service_errors(exc)
    context = _context(request) | {"silence_form": form}
    return render(request, "web/alerts.html", context, status=400)


@require_POST
@operator_required
def silence_expire(request, pk: int):
    alerts.silence_expire(actor=request.user, silence=get_object_or_404(AlertSilence, pk=pk))
    messages.success(request, "Silence ended.")
    return redirect("web:alerts")


def _channel_form_page(request, *, channel: NotificationChannel | None = None):
    initial = None
    if channel is not None:
        initial = {
            "name": channel.name,
            "kind": channel.kind,
            "email_to": ", ".join(channel.email_to),
            "enabled": channel.enabled,
        }
    form = ChannelForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            channel = notifications.channel_save(actor=request.user, channel=channel, **form.values())
            messages.success(request, f"Channel {channel.name} saved.")
            return redirect("web:alerts")
        except ServiceValidationError as exc:
            form.add_service_errors(exc)
    status = 400 if request.method == "POST" else 200
    return render(request, "web/channel_form.html", {"form": form, "channel": channel}, status=status)


@admin_required
def channel_create(request):
    return _channel_form_page(request)


@admin_required
def channel_edit(request, pk: int):
    return _channel_form_page(request, channel=get_object_or_404(NotificationChannel, pk=pk))


@require_POST
@admin_required
def channel_delete(request, pk: int):
    notifications.channel_delete(actor=request.user, channel=get_object_or_404(NotificationChannel, pk=pk))
    messages.success(request, "Channel deleted.")
    return redirect("web:alerts")


@require_POST
@admin_required
def channel_test(request, pk: int):
    channel = get_object_or_404(NotificationChannel, pk=pk)
    notifications.channel_test(actor=request.user, channel=channel)
    messages.success(request, f"Test notification to {channel.name} queued; its result shows here.")
    return redirect("web:alerts")
