"""The overview (live status of every flow, the topology, firing alerts first) and pools."""

from __future__ import annotations

import time

from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from controlplane import assurance
from controlplane.core import microcache
from controlplane.flows import pools, selectors
from controlplane.status import activity, rollup
from controlplane.web import summaries
from controlplane.web.access import viewer_required

# -- overview ---------------------------------------------------------------------------------------------
# The overview's flow table and readiness list show this many flows at most (the flows page has them all,
# with search, filters and pages): firing alerts first, and the lowest readiness first.
OVERVIEW_ROWS = 50


def _lowest_first(readiness) -> tuple[bool, int]:
    return (not readiness.applies, readiness.score if readiness.applies else 0)


def _overview_context() -> dict:
    live = activity.live_status()
    clusters = list(selectors.cluster_list())
    ordered, firing = summaries.flows_firing_first(live.flows)
    readiness = list(assurance.flow_readiness_all(live.flows, every_flow=True).values())
    if len(readiness) > OVERVIEW_ROWS:
        readiness = sorted(readiness, key=_lowest_first)[:OVERVIEW_ROWS]
    return {
        "summaries": ordered[:OVERVIEW_ROWS],
        "flows_total": len(ordered),
        "pool_waiting": [summary for summary in live.flows if summary.pool_without_workers],
        "firing": firing,
        "clusters": clusters,
        "topology": summaries.topology(clusters=clusters, summaries=live.flows),
        "readiness": readiness,
        "healths": rollup.HEALTHS,
        "activity": live.replication,
        "back": reverse("web:overview"),
    }


def _overview_live_shared(request) -> str:
    """The overview's live part (`_overview_live.html`), refreshed every 5 s by every open overview: built
    once for the viewers of a role within a moment (`core.microcache`: a change of configuration is seen at
    once; what the workers report is at most that old, and the part says when it was put together). The
    pause and resume dialogs, with the viewer's own CSRF token, are the page's (`overview`)."""

    def build() -> str:
        context = _overview_context() | {"as_of": timezone.now()}
        return render_to_string("web/_overview_live.html", context, request=request)

    html, _ = microcache.shared("overview-live", (request.web_role,), build)
    return html


@viewer_required
def overview(request):
    return render(
        request, "web/overview.html", {"overview_live_html": mark_safe(_overview_live_shared(request))}
    )


@viewer_required
def overview_live(request):
    return HttpResponse(_overview_live_shared(request))


# -- pools ------------------------------------------------------------------------------------------------
@viewer_required
def pool_list(request):
    return render(request, "web/pools.html", {"pools": pools.pool_list(), "now": time.time()})
