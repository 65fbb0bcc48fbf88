"""Consumer group pages: every group on every cluster, one group's offsets and lag with what the flows
that checkpoint it know, and the offset reset and deletion of an inactive group (operator; dry run
first)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from controlplane.browse import group_changes, groups
from controlplane.core.errors import ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.flows import selectors
from controlplane.web.access import operator_required, viewer_required
from controlplane.web.listing import Filter, ListSpec, Sort, list_page


def _cluster(alias: str):
    return get_object_or_404(selectors.cluster_list(), alias=alias)


# Kafka's consumer group states (ConsumerGroupState), and UNKNOWN when the broker does not say.
GROUP_STATES = ("STABLE", "EMPTY", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "DEAD", "UNKNOWN")


@dataclass(frozen=True)
class GroupEntry:
    """One group on one cluster: a row of the groups list."""

    cluster: str
    row: groups.GroupRow


def group_list_spec(clusters: list, states: list[str]) -> ListSpec:
    return ListSpec(
        sorts=(
            Sort("group", key=lambda e: e.row.group),
            Sort("cluster", key=lambda e: (e.cluster, e.row.group)),
            Sort("state", key=lambda e: e.row.state),
            Sort("members", key=lambda e: e.row.members),
            Sort("partitions", key=lambda e: e.row.partitions),
            Sort("lag", key=lambda e: e.row.lag),
        ),
        default_sort="group",
        search_text=lambda e: " ".join([e.row.group, *(f.name for f in e.row.flows)]),
        search_label="Search groups or flows",
        filters=(
            Filter("cluster", "Cluster", [(c.alias, c.alias) for c in clusters], key=lambda e: e.cluster),
            Filter("state", "State", [(state, state) for state in states], key=lambda e: e.row.state),
            Filter(
                "checkpointed",
                "Checkpointed",
                (("yes", "by a flow"), ("no", "by no flow")),
                key=lambda e: "yes" if e.row.flows else "no",
            ),
        ),
    )


@viewer_required
def group_list(request):
    clusters = list(selectors.cluster_list().order_by("alias"))
    chosen = [c for c in clusters if c.alias == request.GET.get("cluster")] or clusters
    listings = groups.group_list(clusters=chosen)  # only the chosen cluster is read
    entries = [GroupEntry(entry.cluster.alias, row) for entry in listings for row in entry.groups]
    states = sorted(set(GROUP_STATES) | {e.row.state for e in entries})
    listing = list_page(request, group_list_spec(clusters, states), entries)
    return render(
        request,
        "web/groups.html",
        {
            "clusters": clusters,
            "listings": listings,
            "listing": listing,
            "chosen": request.GET.get("cluster", ""),
        },
        status=400 if listing.errors else 200,
    )


def _detail_context(cluster, group: str) -> tuple[dict, int]:
    context: dict = {
        "cluster": cluster,
        "group": group,
        "strategies": [strategy.value for strategy in group_changes.ResetStrategy],
    }
    try:
        context["detail"] = groups.group_detail(cluster=cluster, group=group)
    except ClusterUnavailable as exc:
        context["problem"] = str(exc)
        return context, exc.http_status
    return context, 200


@viewer_required
def group_detail(request, alias: str, group: str):
    context, status = _detail_context(_cluster(alias), group)
    return render(request, "web/group.html", context, status=status)


def _answer(request, template: str, context: dict, change) -> object:
    """A group change's htmx fragment (always 200, like the other refusal fragments): the dry run, what
    was done, or why not."""
    try:
        context["result"] = change()
    except ServiceValidationError as exc:
        context["errors"] = [f"{name}: {text}" for name, texts in exc.errors.items() for text in texts]
    except (ServiceConflict, PermissionDenied, ClusterUnavailable) as exc:
        context["errors"] = [str(exc)]
    return render(request, template, context)


@require_POST
@operator_required
def group_reset(request, alias: str, group: str):
    cluster = _cluster(alias)
    return _answer(
        request,
        "web/_group_reset.html",
        {"cluster": cluster, "group": group},
        lambda: group_changes.group_offsets_reset(
            actor=request.user,
            cluster=cluster,
            group=group,
            strategy=request.POST.get("strategy", ""),
            timestamp=request.POST.get("timestamp", ""),
            flow_id=request.POST.get("flow") or None,
            topic=request.POST.get("topic", ""),
            partitions=request.POST.get("partitions", ""),
            shift=request.POST.get("shift"),
            offset=request.POST.get("offset"),
            dry_run="apply" not in request.POST,
        ),
    )


@require_POST
@operator_required
def group_delete(request, alias: str, group: str):
    cluster = _cluster(alias)
    return _answer(
        request,
        "web/_group_delete.html",
        {"cluster": cluster, "group": group},
        lambda: group_changes.group_delete(
            actor=request.user, cluster=cluster, group=group, dry_run="apply" not in request.POST
        ),
    )
