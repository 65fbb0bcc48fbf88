"""The web UI's pages (namespace `web`), included at the site root by controlplane/urls.py."""

from django.urls import path, register_converter

from controlplane.core.bounds import IdConverter
from controlplane.web import alerts, assurance, audit, browse, flows, groups, operations, overview, reports

app_name = "web"
register_converter(IdConverter, "id")

urlpatterns = [
    path("login/", overview.login, name="login"),
    path("logout/", overview.logout, name="logout"),
    path("", overview.overview, name="overview"),
    path("overview/live/", overview.overview_live, name="overview-live"),
    path("pools/", overview.pool_list, name="pools"),
    path("clusters/", flows.cluster_list, name="clusters"),
    path("clusters/new/", flows.cluster_create, name="cluster-create"),
    path("clusters/<id:pk>/", browse.cluster_detail, name="cluster"),
    path("clusters/<id:pk>/edit/", flows.cluster_edit, name="cluster-edit"),
    path("clusters/<id:pk>/check/", flows.cluster_check, name="cluster-check"),
    path("clusters/<id:pk>/delete/", flows.cluster_delete, name="cluster-delete"),
    path("flows/", flows.flow_list, name="flows"),
    path("flows/new/", flows.flow_create, name="flow-create"),
    path("flows/preview/", flows.flow_preview, name="flow-preview"),
    path("flows/<id:pk>/", flows.flow_detail, name="flow"),
    path("flows/<id:pk>/live/", flows.flow_live, name="flow-live"),
    path("flows/<id:pk>/edit/", flows.flow_edit, name="flow-edit"),
    path("flows/<id:pk>/pause/", flows.flow_pause, name="flow-pause"),
    path("flows/<id:pk>/resume/", flows.flow_resume, name="flow-resume"),
    path("flows/<id:pk>/delete/", flows.flow_delete, name="flow-delete"),
    path("flows/<id:pk>/events/<id:event_id>/", assurance.mismatch_event, name="mismatch-event"),
    path("flows/<id:pk>/failover/", operations.failover_page, name="failover"),
    path("flows/<id:pk>/failover/plan/", operations.failover_plan, name="failover-plan"),
    path("flows/<id:pk>/operations/<id:operation_id>/", operations.operation_status, name="operation"),
    path("flows/<id:pk>/failover/execute/", operations.failover_execute, name="failover-execute"),
    path("flows/<id:pk>/failback/", operations.failback_execute, name="failback-execute"),
    path("flows/<id:pk>/drills/", operations.drills_view, name="drills"),
    path("flows/<id:pk>/cutover/", operations.cutover_view, name="cutover"),
    path("mm2/import/", flows.mm2_import, name="mm2-import"),
    path("mm2/export/", flows.mm2_export, name="mm2-export"),
    path("mm2/takeover/", operations.mm2_takeover, name="mm2-takeover"),
    path("audit/", audit.audit, name="audit"),
    path("alerts/", alerts.alert_page, name="alerts"),
    path("alerts/live/", alerts.alert_live, name="alerts-live"),
    path("alerts/silences/new/", alerts.silence_create, name="silence-create"),
    path("alerts/silences/<id:pk>/expire/", alerts.silence_expire, name="silence-expire"),
    path("alerts/channels/new/", alerts.channel_create, name="channel-create"),
    path("alerts/channels/<id:pk>/edit/", alerts.channel_edit, name="channel-edit"),
    path("alerts/channels/<id:pk>/delete/", alerts.channel_delete, name="channel-delete"),
    path("alerts/channels/<id:pk>/test/", alerts.channel_test, name="channel-test"),
    path("topics/", browse.topic_list, name="topics"),
    path("topics/<str:alias>/<path:topic>/", browse.topic_detail, name="topic"),
    path("topic-details/<str:alias>/<path:topic>", browse.topic_details, name="topic-details"),
    path("flows/<id:pk>/compare/", browse.record_copies, name="record-copies"),
    path("groups/", groups.group_list, name="groups"),
    path("group-reset/<str:alias>/<path:group>", groups.group_reset, name="group-reset"),
    path("groups/<str:alias>/<path:group>", groups.group_detail, name="group"),
    path("reports/", reports.report_page, name="reports"),
    path("reports/run/", reports.reports_run, name="reports-run"),
    path("reports/run/status/", reports.reports_run_status, name="reports-run-status"),
]
