"""Roles: staff (import, start runs, create campaigns, export) and reviewers (review what they are given)."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group

REVIEWERS_GROUP = "reviewers"


def is_staff(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Staff may import corpora, start runs, create campaigns and export."""
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def is_reviewer(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Reviewers (and staff) may review the items they are given."""
    if not (user.is_authenticated and user.is_active):
        return False
    return user.is_staff or user.groups.filter(name=REVIEWERS_GROUP).exists()


def reviewers_group() -> Group:
    """The reviewers group, created on first use."""
    group, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
    return group
