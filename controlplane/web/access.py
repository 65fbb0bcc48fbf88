"""Who may see and do what in the web UI: the API's roles, enforced on every view (the menus only hide)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from controlplane import core
from controlplane.core.roles import Role, role_of


def role_required(role: Role) -> Callable:
    """Anonymous users go to the login page; users below `role` get a 403 page saying what they lack."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path(), reverse("web:login"))
            current = role_of(request.user)
            if current is None or current < role:
                held = "no role" if current is None else f"the {current.group_name} role"
                if request.method not in ("GET", "HEAD", "OPTIONS"):  # the form is not read
                    core.audit_role_refusal(
                        actor=request.user,
                        method=request.method,
                        path=request.path,
                        object_type=view.__name__.partition("_")[0],
                        action=view.__name__.partition("_")[2],
                        object_id=kwargs.get("pk", ""),
                        message=f"needs the {role.group_name} role; has {held}",
                    )
                request.web_role = current  # the navigation bar, as on every page they may see
                return render(
                    request,
                    "web/forbidden.html",
                    {"needed": role.group_name, "held": held},
                    status=403,
                )
            request.web_role = current
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


viewer_required = role_required(Role.VIEWER)
operator_required = role_required(Role.OPERATOR)
admin_required = role_required(Role.ADMIN)


def signed_in_required(view: Callable) -> Callable:
    """Any signed-in user, whatever their role: for requests whose service checks the role itself and
    audits a refusal (failover, failback), so that every attempt is on record."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("web:login"))
        request.web_role = role_of(request.user)
        return view(request, *args, **kwargs)

    return wrapper


def back_url(request, default: str) -> str:
    """The page a POST came from (when it is ours), else `default`."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default
