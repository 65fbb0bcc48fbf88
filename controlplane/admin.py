"""Django admin: read-mostly views; secrets shown by name only, changes go through the API (audited)."""

from django.contrib import admin

from controlplane.core.roles import Role, role_of
from controlplane.flows import engine
from controlplane.models import AuditEvent, Cluster, Flow, FlowEvent, FlowPartitionStatus, SsoIdentity


def _admins_only(request) -> bool:
    """The admin site is for the admin role, whatever is_staff says (a role given or taken away in the
    admin site's group editor, which `user_set_role` does not see)."""
    return role_of(request.user) is Role.ADMIN


class ReadOnlyAdmin(admin.ModelAdmin):
    """Writes must go through services (validation, audit); the admin only looks, and the admin role
    may look whatever Django's model permissions say (a role is a group, not a set of permissions: an
    admin made by `create_admin` or SSO is staff but no superuser, and saw 403 on every model page)."""

    def has_view_permission(self, request, obj=None):
        return _admins_only(request)

    def has_module_permission(self, request):
        return _admins_only(request)

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


@admin.register(SsoIdentity)
class SsoIdentityAdmin(ReadOnlyAdmin):
    """Which provider identity signs in as which user (docs/sso.md); deleting the user unlinks it."""

    list_display = ["user", "issuer", "subject", "created_at"]


admin.site.has_permission = _admins_only
admin.site.register(FlowEvent, ReadOnlyAdmin)
