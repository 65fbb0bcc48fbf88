from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from controlplane.api import alerts, assurance, browse, failover, offsets, reports, takeover, views

router = DefaultRouter()
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("flows", views.FlowViewSet, basename="flow")
router.register("audit", views.AuditEventViewSet, basename="audit")
router.register("reports/runs", reports.ReportRunViewSet, basename="report-run")
router.register("operations", failover.OperationViewSet, basename="operation")
router.register("alerts/silences", alerts.SilenceViewSet, basename="silence")
router.register("alerts", alerts.AlertViewSet, basename="alert")
router.register("notification-channels", alerts.ChannelViewSet, basename="notification-channel")

urlpatterns = [
    path("status/", views.LiveStatusView.as_view(), name="live-status"),
    path("pools/", views.PoolListView.as_view(), name="pools"),
    path("tokens/rotate/", views.ApiTokenRotateView.as_view(), name="token-rotate"),
    path("mm2/import/", views.Mm2ImportView.as_view(), name="mm2-import"),
    path("mm2/export/", views.Mm2ExportView.as_view(), name="mm2-export"),
    re_path(rf"^clusters/(?P<pk>{views.ID_PATTERN})/topics/$", browse.TopicListView.as_view()),
    re_path(
        rf"^clusters/(?P<pk>{views.ID_PATTERN})/topics/(?P<topic>.+)/records/$",
        browse.TopicRecordsView.as_view(),
    ),
    re_path(
        rf"^clusters/(?P<pk>{views.ID_PATTERN})/topics/(?P<topic>.+)/details/$",
        browse.TopicDetailsView.as_view(),
    ),
    re_path(
        rf"^clusters/(?P<pk>{views.ID_PATTERN})/topics/(?P<topic>.+)/search/$",
        browse.TopicSearchView.as_view(),
    ),
    re_path(
        rf"^clusters/(?P<pk>{views.ID_PATTERN})/topics/(?P<topic>.+)/tail/$",
        browse.TopicTailView.as_view(),
    ),
    re_path(rf"^clusters/(?P<pk>{views.ID_PATTERN})/groups/$", browse.GroupListView.as_view()),
    re_path(
        rf"^clusters/(?P<pk>{views.ID_PATTERN})/groups/(?P<group>.+)/reset/$", browse.GroupResetView.as_view()
    ),
    re_path(
        rf"^clusters/(?P<pk>{views.ID_PATTERN})/groups/(?P<group>.+)/delete/$",
        browse.GroupDeleteView.as_view(),
    ),
    re_path(
        rf"^clusters/(?P<pk>{views.ID_PATTERN})/groups/(?P<group>.+)/$", browse.GroupDetailView.as_view()
    ),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/copies/$", browse.RecordCopiesView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/failover/plan/$", failover.FailoverPlanView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/failover/$", failover.FailoverExecuteView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/failback/$", failover.FailbackView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/drills/$", failover.DrillView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/cutover/$", failover.CutoverView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/offsets/translate/$", offsets.OffsetMappingView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/rpo-budget/$", alerts.RpoBudgetView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/mm2-takeover/$", takeover.Mm2TakeoverView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/rpo/$", assurance.FlowRpoView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/readiness/$", assurance.FlowReadinessView.as_view()),
    re_path(rf"^flows/(?P<pk>{views.ID_PATTERN})/verification/$", assurance.FlowVerificationView.as_view()),
    path("reports/run/", reports.ReportRunViewSet.as_view({"post": "run"}), name="report-run-request"),
    *router.urls,
    re_path(r"^reports/(?P<dataset>[^/]+)/$", reports.ReportRowsView.as_view(), name="report-rows"),
]
