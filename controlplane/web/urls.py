"""The web UI's pages (namespace `web`), included at the site root by controlplane/urls.py."""

from django.urls import path

from controlplane.web import alerts, assurance, browse, groups, views

app_name = "web"

urlpatterns = [
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("", views.overview, name="overview"),
    path("overview/live/", views.overview_live, name="overview-live"),
    path("clusters/", views.cluster_list, name="clusters"),
    path("clusters/new/", views.cluster_create, name="cluster-create"),
    path("clusters/<int:pk>/edit/", views.cluster_edit, name="cluster-edit"),
    path("clusters/<int:pk>/check/", views.cluster_check, name="cluster-check"),
    path("clusters/<int:pk>/delete/", views.cluster_delete, name="cluster-delete"),
    path("flows/", views.flow_list, name="flows"),
    path("flows/new/", views.flow_create, name="flow-create"),
    path("flows/preview/", views.flow_preview, name="flow-preview"),
    path("flows/<int:pk>/", views.flow_detail, name="flow"),
    path("flows/<int:pk>/live/", views.flow_live, name="flow-live"),
    path("flows/<int:pk>/edit/", views.flow_edit, name="flow-edit"),
    path("flows/<int:pk>/pause/", views.flow_pause, name="flow-pause"),
    path("flows/<int:pk>/resume/", views.flow_resume, name="flow-resume"),
    path("flows/<int:pk>/delete/", views.flow_delete, name="flow-delete"),
    path("flows/<int:pk>/events/<int:event_id>/", assurance.mismatch_event, name="mismatch-event"),
    path("flows/<int:pk>/failover/", views.failover, name="failover"),
    path("flows/<int:pk>/failover/plan/", views.failover_plan, name="failover-plan"),
    path("flows/<int:pk>/operations/<int:operation_id>/", views.operation_status, name="operation"),
    path("flows/<int:pk>/failover/execute/", views.failover_execute, name="failover-execute"),
    path("flows/<int:pk>/failback/", views.failback_execute, name="failback-execute"),
    path("mm2/import/", views.mm2_import, name="mm2-import"),
    path("mm2/export/", views.mm2_export, name="mm2-export"),
    path("audit/", views.audit, name="audit"),
    path("alerts/", alerts.alert_page, name="alerts"),
    path("alerts/live/", alerts.alert_live, name="alerts-live"),
    path("alerts/silences/new/", alerts.silence_create, name="silence-create"),
    path("alerts/silences/<int:pk>/expire/", alerts.silence_expire, name="silence-expire"),
    path("alerts/channels/new/", alerts.channel_create, name="channel-create"),
    path("alerts/channels/<int:pk>/edit/", alerts.channel_edit, name="channel-edit"),
    path("alerts/channels/<int:pk>/delete/", alerts.channel_delete, name="channel-delete"),
    path("alerts/channels/<int:pk>/test/", alerts.channel_test, name="channel-test"),
    path("topics/", browse.topic_list, name="topics"),
    path("topics/<str:alias>/<str:topic>/", browse.topic_detail, name="topic"),
    path("flows/<int:pk>/compare/", browse.record_copies, name="record-copies"),
    path("groups/", groups.group_list, name="groups"),
    path("group-reset/<str:alias>/<path:group>", groups.group_reset, name="group-reset"),
    path("groups/<str:alias>/<path:group>", groups.group_detail, name="group"),
    path("reports/", views.reports, name="reports"),
    path("reports/run/", views.reports_run, name="reports-run"),
    path("reports/run/status/", views.reports_run_status, name="reports-run-status"),
]
