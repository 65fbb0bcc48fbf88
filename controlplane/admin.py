"""Django admin: read-mostly views; secrets shown by name only, changes go through the API (audited)."""

from django.contrib import admin

from controlplane.flows import engine
from controlplane.models import AuditEvent, Cluster, Flow, FlowEvent, FlowPartitionStatus


class ReadOnlyAdmin(admin.ModelAdmin):
    """Writes must go through services (validation, audit); the admin only looks."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Cluster)
class ClusterAdmin(ReadOnlyAdmin):
    list_display = ["alias", "bootstrap_servers", "security_protocol", "sasl_mechanism", "secrets_set"]
    exclude = ["secrets_encrypted"]

    @admin.display(description="secrets set (values hidden)")
    def secrets_set(self, cluster):
        return ", ".join(engine.secret_names(engine.cluster_secrets(cluster))) or "-"


@admin.register(Flow)
class FlowAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "enabled", "state", "replication_policy_class", "updated_at"]
    list_filter = ["enabled", "state"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "actor_name", "action", "object_type", "object_repr", "outcome"]
    list_filter = ["action", "object_type", "outcome"]


admin.site.register(FlowPartitionStatus, ReadOnlyAdmin)
admin.site.register(FlowEvent, ReadOnlyAdmin)
