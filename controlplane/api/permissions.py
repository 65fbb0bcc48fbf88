"""Role checks for every API endpoint: reads need viewer, writes admin, unless a view says otherwise."""

from __future__ import annotations

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission

from controlplane import core
from controlplane.core.roles import Role, role_of


def request_role(request) -> Role | None:
    """The role of the request's user, looked up once per request: the permission check, the view and each
    row its serializer writes ask it."""
    if not hasattr(request, "_mirrorplane_role"):
        request._mirrorplane_role = role_of(request.user)
    return request._mirrorplane_role


def required_role(request, view) -> Role:
    """The role an action needs: `view.action_roles[action]`, else viewer to read and admin to write."""
    action = getattr(view, "action", None)
    overrides = getattr(view, "action_roles", {})
    if action in overrides:
        return overrides[action]
    return Role.VIEWER if request.method in SAFE_METHODS else Role.ADMIN


class ApiDocsPermission(BasePermission):
    """The OpenAPI schema and its Swagger UI: anyone signed in (session or token), or anyone at all with
    MIRRORPLANE_API_DOCS_OPEN (read at each request)."""

    def has_permission(self, request, view) -> bool:
        return settings.MIRRORPLANE_API_DOCS_OPEN or bool(request.user and request.user.is_authenticated)


class RolePermission(BasePermission):
    """401 when not authenticated (DRF turns a refusal without credentials into 401), else 403 below the role."""

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        needed = required_role(request, view)
        role = request_role(request)
        if role is None or role < needed:
            self.message = (
                f"this action needs the {needed.group_name} role; you have "
                f"{'no role' if role is None else 'the ' + role.group_name + ' role'}"
            )
            if request.method not in SAFE_METHODS:
                object_type = getattr(view, "basename", None) or type(view).__name__.removesuffix("View")
                core.audit_role_refusal(
                    actor=request.user,
                    method=request.method,
                    path=request.path,
                    object_type=object_type,
                    object_id=getattr(view, "kwargs", {}).get("pk", ""),
                    action=getattr(view, "action", None),
                    message=self.message,
                )
            return False
        return True
