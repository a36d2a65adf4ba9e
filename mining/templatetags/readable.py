"""Readable words for the keys the app stores (run statistics, stages, parameters, pre-filter rules), so that pages
never show raw keys such as `kept_after_filters`:  {% load readable %} {{ key|readable }}."""

from __future__ import annotations

import math
from typing import Any

from django import template
from django.utils.html import escape, format_html_join
from django.utils.safestring import SafeString

from ..selectors import job_bar, run_threshold_info
from ..words import ordered_timings, readable, shown

register = template.Library()

register.filter("readable", readable)
register.filter("shown", shown)
register.filter("ordered_timings", ordered_timings)


@register.filter
def scalar(value: Any) -> bool:
    """True for values a page can print as they are (not dicts or lists)."""
    return not isinstance(value, dict | list | tuple)


@register.filter
def scalar_items(mapping: Any) -> list[tuple[Any, Any]]:
    """The (key, value) items of a mapping whose values a page prints as they are (a line of run statistics joined
    by " · " must not end with a separator left by a nested value it skips)."""
    return [(k, v) for k, v in (mapping or {}).items() if scalar(v)]


@register.filter
def percent(value: Any) -> str:
    """A share (0..1) as the pages print shares: a whole percent ("89 %"); "–" for none."""
    try:
        return f"{float(value) * 100:.0f} %"
    except (TypeError, ValueError):
        return "–"


@register.filter
def finite(value: Any) -> bool:
    """True for a number that is neither NaN nor infinite (an undefined statistic is shown in words instead)."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


@register.filter
def percent1(value: Any) -> str:
    """A share in [0, 1] as a percentage with one decimal ('87.3 %': precision estimates and their intervals); ''
    for no value."""
    try:
        return f"{100 * float(value):.1f} %"
    except (TypeError, ValueError):
        return ""


@register.filter
def code_spans(text: Any) -> SafeString:
    """Plain text whose `backticked` parts (a command in a reason shared with the API and the exports) are shown as
    <code> on a page instead of with their backticks; the rest is escaped."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: leave the text as it is
        return escape(str(text))
    return format_html_join(
        "", "{}", ((p if i % 2 == 0 else SafeString(f"<code>{escape(p)}</code>"),) for i, p in enumerate(parts))
    )


@register.inclusion_tag("mining/_progress.html")
def progress_bar(job: Any) -> dict[str, Any]:
    """A job's progress bar and its label (see mining.selectors.job_bar)."""
    return {"bar": job_bar(job), "job": job}


@register.filter
def threshold_words(run: Any) -> str:
    """The threshold that keeps a run's pairs and where it comes from, in words (see run_threshold_info): the run
    page, the results page and the export page say the same."""
    info = run_threshold_info(run)
    if info.value is None:
        return f"none: every pair no pre-filter rejected ({info.reason})"
    return f"{info.value:.4f} ({info.reason})"
