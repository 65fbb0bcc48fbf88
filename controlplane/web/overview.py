"""The overview (live status of every flow, the topology, firing alerts first) and pools."""

from __future__ import annotations

import time

from django.shortcuts import render
from django.urls import reverse

from controlplane import assurance
from controlplane.flows import pools, selectors
from controlplane.status import activity, rollup
from controlplane.web import summaries
from controlplane.web.access import viewer_required


# -- overview ---------------------------------------------------------------------------------------------
def _overview_context() -> dict:
    live = activity.live_status()
    clusters = list(selectors.cluster_list())
    ordered, firing = summaries.flows_firing_first(live.flows)
    return {
        "summaries": ordered,
        "pool_waiting": [summary for summary in live.flows if summary.pool_without_workers],
        "firing": firing,
        "clusters": clusters,
        "topology": summaries.topology(clusters=clusters, summaries=live.flows),
        "readiness": assurance.flow_readiness_all(live.flows).values(),
        "healths": rollup.HEALTHS,
        "activity": live.replication,
        "back": reverse("web:overview"),
    }


@viewer_required
def overview(request):
    return render(request, "web/overview.html", _overview_context())


@viewer_required
def overview_live(request):
    return render(request, "web/_overview_live.html", _overview_context())


# -- pools ------------------------------------------------------------------------------------------------
@viewer_required
def pool_list(request):
    return render(request, "web/pools.html", {"pools": pools.pool_list(), "now": time.time()})
