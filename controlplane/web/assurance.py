"""Pages of continuous verification and failover readiness: a mismatch's two records side by side."""

from __future__ import annotations

from django.shortcuts import get_object_or_404, render

from controlplane import browse
from controlplane.flows import selectors
from controlplane.status.models import FlowEvent, FlowEventKind
from controlplane.web.access import viewer_required


@viewer_required
def mismatch_event(request, pk: int, event_id: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    event = get_object_or_404(FlowEvent, pk=event_id, flow=flow, kind=FlowEventKind.DATA_MISMATCH)
    detail = browse.event_detail_shown(event=event, role=request.web_role)
    return render(
        request,
        "web/mismatch_event.html",
        {
            "flow": flow,
            "event": event,
            "source": detail.get("source"),
            "target": detail.get("target"),
            "remote_topic": detail.get("remote_topic", ""),
            "range": detail.get("range"),
            "compared_as_copied": detail.get("compared_as_copied") or [],
        },
    )
