"""Django admin: read-mostly views; secrets shown by name only, changes go through the API (audited)."""

from django.contrib import admin, messages
from django.contrib.auth import get_user_model

from controlplane import core
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditEvent, SsoIdentity
from controlplane.core.roles import Role, role_of
from controlplane.flows import engine
from controlplane.flows.models import Cluster, Flow
from controlplane.status.models import FlowEvent, FlowPartitionStatus


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


class UserAdmin(ReadOnlyAdmin):
    """Users, their role and how they sign in; an admin disables a user here (docs/sso.md), which ends their
    sessions and API token at once (`user_set_active`, audited). Roles come from `create_admin`, the API
    or the identity provider's groups, never from editing a user here."""

    list_display = ["username", "role", "is_active", "signs_in_through", "last_login"]
    list_filter = ["is_active"]
    search_fields = ["username", "email"]
    fields = ["username", "email", "is_active", "last_login", "date_joined"]
    actions = ["disable", "enable"]

    @admin.display(description="role")
    def role(self, user):
        held = role_of(user)
        return held.value if held else "-"

    @admin.display(description="signs in through")
    def signs_in_through(self, user):
        identity = SsoIdentity.objects.filter(user=user).first()
        return identity.issuer if identity else "password"

    @admin.action(description="Disable the selected users (their sessions and API tokens end now)")
    def disable(self, request, queryset):
        self._set_active(request, queryset, active=False)

    @admin.action(description="Enable the selected users again")
    def enable(self, request, queryset):
        self._set_active(request, queryset, active=True)

    def _set_active(self, request, queryset, *, active: bool) -> None:
        for user in queryset:
            try:
                core.user_set_active(actor=request.user, user=user, active=active)
            except ServiceValidationError as exc:
                self.message_user(request, f"{user.get_username()}: {exc}", messages.ERROR)
            else:
                done = "enabled" if active else "disabled (their sessions and API token ended)"
                self.message_user(request, f"user {user.get_username()} {done}", messages.SUCCESS)


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), UserAdmin)
admin.site.has_permission = _admins_only
admin.site.register(FlowEvent, ReadOnlyAdmin)
