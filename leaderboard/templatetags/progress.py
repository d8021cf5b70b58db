"""Pending axes as a badge: which of a probe's axes are still being measured
(``leaderboard.selectors.progress``), shown on the board rows and the probe page."""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


def pending_axes_html(axes) -> str:
    """A badge listing the pending axes ("transfer 1/2, steer pending"), or "" when none."""
    if not axes:
        return ""
    text = escape(", ".join(a.label for a in axes))
    return (
        '<li class="badge pending" title="still being measured: the other numbers are final; a'
        ' pending component is imputed until its runs finish">'
        f"pending: {text}</li>"
    )


@register.simple_tag
def pending_axes_badge(axes):
    """``{% pending_axes_badge d.pending_axes %}``: the badge as an ``<li>``."""
    return mark_safe(pending_axes_html(axes))  # noqa: S308 - escaped above
