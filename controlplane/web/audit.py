"""The audit log page (filtered by controlplane.core.audit.AuditFilter, as the API)."""

from __future__ import annotations

from django.shortcuts import render

from controlplane import core
from controlplane.core.models import AuditAction, AuditOutcome
from controlplane.web import summaries
from controlplane.web.access import viewer_required
from controlplane.web.listing import ListSpec, Sort, list_page

AUDIT_PAGE_SIZE = 50


# -- audit and reports ------------------------------------------------------------------------------------
AUDIT_LIST = ListSpec(
    sorts=(Sort("at"), Sort("actor", field="actor_name"), Sort("action"), Sort("object", field="object_repr"),
           Sort("outcome")),
    default_sort="-at",
    search_fields=("actor_name", "client_address", "object_type", "object_repr", "object_id", "detail"),
    search_label="Search actor, address, object or detail",
    page_size=AUDIT_PAGE_SIZE,
)  # fmt: skip


@viewer_required
def audit(request):
    # The audit filters are the API's (django-filter); search, sort and pages the shared list helper's.
    filtered = core.AuditFilter(request.GET or None, queryset=core.audit_list())
    listing = list_page(request, AUDIT_LIST, filtered.qs)
    return render(
        request,
        "web/audit.html",
        {
            "filter": filtered,
            "listing": listing,
            "page": listing.page,
            "absent": summaries.ABSENT,  # a created field shows only its value
            "actions": AuditAction.choices,
            "outcomes": AuditOutcome.choices,
            "object_types": core.audit_list()
            .order_by("object_type")
            .values_list("object_type", flat=True)
            .distinct(),
        },
    )
