"""Consumer group pages: every group on every cluster, one group's offsets and lag with what the flows
that checkpoint it know, and the offset reset of an inactive group (operator; dry run first)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from controlplane import groups, selectors
from controlplane.errors import ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.web.access import operator_required, viewer_required


def _cluster(alias: str):
    return get_object_or_404(selectors.cluster_list(), alias=alias)


@viewer_required
def group_list(request):
    clusters = list(selectors.cluster_list().order_by("alias"))
    chosen = [c for c in clusters if c.alias == request.GET.get("cluster")] or clusters
    return render(
        request,
        "web/groups.html",
        {
            "clusters": clusters,
            "listings": groups.group_list(clusters=chosen),
            "chosen": request.GET.get("cluster", ""),
        },
    )


def _detail_context(cluster, group: str) -> tuple[dict, int]:
    context: dict = {
        "cluster": cluster,
        "group": group,
        "strategies": [strategy.value for strategy in groups.ResetStrategy],
    }
    try:
        context["detail"] = groups.group_detail(cluster=cluster, group=group)
    except ClusterUnavailable as exc:
        context["problem"] = str(exc)
        return context, 502
    return context, 200


@viewer_required
def group_detail(request, alias: str, group: str):
    context, status = _detail_context(_cluster(alias), group)
    return render(request, "web/group.html", context, status=status)


@require_POST
@operator_required
def group_reset(request, alias: str, group: str):
    """The reset form's answer (an htmx fragment, so always 200 like the other refusal fragments): the
    dry run's plan, or what was written, or why not."""
    cluster = _cluster(alias)
    context: dict = {"cluster": cluster, "group": group}
    try:
        context["result"] = groups.group_offsets_reset(
            actor=request.user,
            cluster=cluster,
            group=group,
            strategy=request.POST.get("strategy", ""),
            timestamp=request.POST.get("timestamp", ""),
            flow_id=request.POST.get("flow") or None,
            topic=request.POST.get("topic", ""),
            dry_run="apply" not in request.POST,
        )
    except ServiceValidationError as exc:
        context["errors"] = [f"{name}: {text}" for name, texts in exc.errors.items() for text in texts]
    except (ServiceConflict, PermissionDenied, ClusterUnavailable) as exc:
        context["errors"] = [str(exc)]
    return render(request, "web/_group_reset.html", context)
