"""View decorators and DRF permissions that check roles in the view, never only in templates (the rules, role by role
and endpoint by endpoint: pcapp.roles.ACCESS, printed in docs/PERMISSIONS.md)."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from rest_framework.permissions import BasePermission

from .roles import can_see_run_results, denied_message, is_reviewer, is_staff

View = Callable[..., HttpResponse]


def _require(check: Callable[[Any], bool]) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not check(request.user):
                raise PermissionDenied(denied_message(request.user))  # shown by templates/403.html
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


staff_required = _require(is_staff)
reviewer_required = _require(is_reviewer)
run_results_required = _require(can_see_run_results)


class IsStaff(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return is_staff(request.user)


class IsReviewer(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return is_reviewer(request.user)


class CanSeeRunResults(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return can_see_run_results(request.user)
