"""Roles: staff (import, start runs, create campaigns, see run results, export) and reviewers (review what their
campaigns hand them), and the table of what each role gets from each page and endpoint.

`ACCESS` is the one statement of the rules: docs/PERMISSIONS.md prints it (`access_markdown`) and
tests/faults/test_permissions.py checks every cell of it against the running views.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.db.models import Q, QuerySet

REVIEWERS_GROUP = "reviewers"


def is_staff(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Staff may import corpora, start runs, create campaigns, see run results and export."""
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def is_reviewer(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Reviewers (and staff) may review the items their campaigns hand them."""
    if not (user.is_authenticated and user.is_active):
        return False
    if user.is_staff:
        return True
    # Plain SQL: it runs on every review request, and the ORM's compilation of the join cost more than the query.
    groups = user._meta.get_field("groups")
    through = groups.remote_field.through._meta
    sql = (
        f"SELECT EXISTS (SELECT 1 FROM {through.db_table} ug JOIN {Group._meta.db_table} g ON g.id = ug.group_id "
        "WHERE ug.user_id = %s AND g.name = %s)"
    )
    from .sql import prepared_cursor

    with prepared_cursor() as cur:
        cur.execute(sql, [user.pk, REVIEWERS_GROUP])
        return bool(cur.fetchone()[0])


def can_see_run_results(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Run results (ranked pairs, scores, histograms, comparisons, document pairs) are staff's: a reviewer sees what
    their campaigns' review pages show and nothing more, so a blind campaign stays blind."""
    return is_staff(user)


def may_review() -> QuerySet:
    """The users a campaign may hand items to: active staff and active members of the reviewers group (is_reviewer).
    Anyone else assigned would see "no role" and nothing to review."""
    users = get_user_model().objects.filter(is_active=True)
    return users.filter(Q(is_staff=True) | Q(groups__name=REVIEWERS_GROUP)).distinct().order_by("username")


NO_ROLE = (
    "Your account ({username}) has no role yet, so there is nothing here for you. To review, ask a staff member to "
    "add you to the reviewers group: Admin → Users → {username} → Groups → reviewers (docs/PERMISSIONS.md)."
)
STAFF_ONLY = "This page is for staff (importing, runs, campaigns, calibration and exports); your account is not staff."


def denied_message(user: AbstractBaseUser) -> str:
    """What a signed-in user refused a page is told: how to get a role when they have none, else that it is staff's."""
    if not is_reviewer(user):
        return NO_ROLE.format(username=user.get_username())
    return STAFF_ONLY


def reviewers_group() -> Group:
    """The reviewers group, created on first use."""
    group, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
    return group


# --- the access table -------------------------------------------------------------------------------------------


class Role(Enum):
    """The columns of the access table. The campaign of a row is campaign A (blind); its run is A's run."""

    ANONYMOUS = "anonymous"
    USER = "plain user"
    REVIEWER_OWN = "reviewer of A"
    REVIEWER_OTHER = "reviewer of B only"
    STAFF = "staff (not in A)"


LOGIN = "login"
"""A page's answer to anonymous users: a redirect to the login page."""


@dataclass(frozen=True)
class Access:
    """One row: a page or endpoint and what each role gets from it (an HTTP status, or LOGIN)."""

    key: str
    method: str
    path: str
    what: str
    anonymous: int | str
    user: int | str
    reviewer_own: int | str
    reviewer_other: int | str
    staff: int | str

    def cell(self, role: Role) -> int | str:
        return getattr(self, role.name.lower())


ACCESS: tuple[Access, ...] = (
    Access(
        "dashboard", "GET", "/", "dashboard (reviewers: their campaigns' progress, no GOOD rate)", LOGIN, *[200] * 4
    ),
    Access("campaign-list", "GET", "/review/", "campaign list (reviewers: theirs only)", LOGIN, 403, 200, 200, 200),
    Access(
        "campaign-review", "GET", "/review/campaigns/A/", "review page (blind: no evidence)", LOGIN, 403, 200, 404, 200
    ),
    Access("campaign-label", "POST", "/review/campaigns/A/label/", "judge the current item", LOGIN, 403, 302, 404, 302),
    Access("campaign-undo", "POST", "/review/campaigns/A/undo/", "undo the last judgement", LOGIN, 403, 302, 404, 302),
    Access(
        "campaign-history", "GET", "/review/campaigns/A/history/0/", "own past judgement", LOGIN, 403, 200, 404, 200
    ),
    Access("campaign-new", "GET", "/review/campaigns/new/", "campaign form", LOGIN, 403, 403, 403, 200),
    Access("campaign-create", "POST", "/review/campaigns/new/", "create a campaign", LOGIN, 403, 403, 403, 302),
    Access("campaign-results", "GET", "/review/campaigns/A/results/", "campaign results", LOGIN, 403, 403, 403, 200),
    Access("campaign-labels", "GET", "/review/campaigns/A/labels.csv", "label export", LOGIN, 403, 403, 403, 200),
    Access("document-pair", "GET", "/review/document-pairs/D/", "document pair with scores", LOGIN, 403, 403, 403, 200),
    Access(
        "document-pair-judge", "POST", "/review/document-pairs/D/", "staff review of a pair", LOGIN, 403, 403, 403, 302
    ),
    Access("run-list", "GET", "/runs/", "run list (status, counts)", LOGIN, 403, 200, 200, 200),
    Access("run-detail", "GET", "/runs/R/", "run status page (parameters, counts)", LOGIN, 403, 200, 200, 200),
    Access("run-results", "GET", "/runs/R/results/", "ranked pairs, scores, histogram", LOGIN, 403, 403, 403, 200),
    Access("run-compare", "GET", "/runs/compare/?a=R&b=S", "run comparison", LOGIN, 403, 403, 403, 200),
    Access(
        "run-check-estimate",
        "POST",
        "/review/runs/R/check-estimate/",
        "campaign checking a run's stated precision",
        LOGIN,
        403,
        403,
        403,
        302,
    ),
    Access(
        "api-judge-item", "POST", "/api/review/judgements/", "judge A's item handed to you", 403, 403, 201, 404, 201
    ),
    Access(
        "api-judge-sampled", "POST", "/api/review/judgements/", "judge a pair A sampled, no campaign", *[403] * 4, 201
    ),
    Access(
        "api-judge-pair", "POST", "/api/review/judgements/", "judge a pair of a run in no campaign", *[403] * 4, 201
    ),
    Access("api-campaign-create", "POST", "/api/review/campaigns/", "create a campaign", *[403] * 4, 201),
    Access("api-campaign-results", "GET", "/api/review/campaigns/A/results/", "campaign results", *[403] * 4, 200),
    Access("api-campaign-labels", "GET", "/api/review/campaigns/A/labels/", "label export", *[403] * 4, 200),
    Access("api-run-list", "GET", "/api/runs/", "run list", 403, 403, 200, 200, 200),
    Access("api-run-detail", "GET", "/api/runs/R/", "run status", 403, 403, 200, 200, 200),
    Access("api-candidates", "GET", "/api/runs/R/candidates/", "ranked pairs with scores", *[403] * 4, 200),
    Access("api-histogram", "GET", "/api/runs/R/histogram/", "score histogram", *[403] * 4, 200),
    Access("api-root", "GET", "/api/", "the API's endpoints", 403, 403, 200, 200, 200),
    Access("api-schema", "GET", "/api/schema/", "OpenAPI schema", 403, 403, 200, 200, 200),
    Access("api-docs", "GET", "/api/docs/", "Swagger UI", 403, 403, 200, 200, 200),
    Access("api-corpus-list", "GET", "/api/corpora/", "corpora (as the corpus pages)", *[403] * 4, 200),
    Access("api-corpus-detail", "GET", "/api/corpora/C/", "one corpus", *[403] * 4, 200),
)
"""What each role gets from each page and endpoint: A is a blind campaign, B another campaign, R the run A sampled
(S a second run), D a document pair of a run in no campaign. 404: the campaign is not among the user's."""


def access_markdown() -> str:
    """ACCESS as the Markdown table docs/PERMISSIONS.md carries."""
    head = ["Method", "Path", "What", *(role.value for role in Role)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in ACCESS:
        cells = [str(row.cell(role)) for role in Role]
        lines.append("| " + " | ".join([row.method, f"`{row.path}`", row.what, *cells]) + " |")
    return "\n".join(lines) + "\n"


SCORE_PARAMS = frozenset({"threshold", "doc_threshold"})
"""Run parameters that are a point on the score scale."""


SCORE_WORDS = ("score", "threshold", "precision", "recall", "cosine", "margin", "confidence")
"""A stats entry whose name holds one of these is about scores, whatever its value (a nested block included)."""


def _no_scores(value: object) -> object:
    """`value` less everything that could be a score or a figure derived from scores: entries named after scores
    (SCORE_WORDS) go whole; of the rest only whole numbers (counts), words and flags stay, in nested dicts too."""
    if isinstance(value, dict):
        kept = {k: _no_scores(v) for k, v in value.items() if not any(w in str(k).lower() for w in SCORE_WORDS)}
        return {k: v for k, v in kept.items() if v is not None and v != {}}
    if isinstance(value, bool | int | str):
        return value
    return None


def run_figures(user: AbstractBaseUser | AnonymousUser, params: dict, stats: dict) -> tuple[dict, dict]:
    """A run's parameters and stats as `user` may see them. Staff: as stored. Anyone else (reviewers): no score and no
    score-derived figure (the threshold parameter, default thresholds, estimated or gold precision, mean scores are
    all left out), so that a blind campaign's reviewer cannot anchor on the run's numbers; counts, names and the
    search's arithmetic stay."""
    if can_see_run_results(user):
        return params, stats
    shown = {k: v for k, v in (params or {}).items() if k not in SCORE_PARAMS and not isinstance(v, float)}
    return shown, _no_scores(stats or {})
