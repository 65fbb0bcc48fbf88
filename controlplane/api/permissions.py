"""Role checks for every API endpoint: reads need viewer, writes admin, unless a view says otherwise."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from controlplane.core.roles import Role, role_of


def required_role(request, view) -> Role:
    """The role an action needs: `view.action_roles[action]`, else viewer to read and admin to write."""
    action = getattr(view, "action", None)
    overrides = getattr(view, "action_roles", {})
    if action in overrides:
        return overrides[action]
    return Role.VIEWER if request.method in SAFE_METHODS else Role.ADMIN


class RolePermission(BasePermission):
    """401 when not authenticated (DRF turns a refusal without credentials into 401), else 403 below the role."""

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        needed = required_role(request, view)
        role = role_of(request.user)
        if role is None or role < needed:
            self.message = (
                f"this action needs the {needed.group_name} role; you have "
                f"{'no role' if role is None else 'the ' + role.group_name + ' role'}"
            )
            return False
        return True
