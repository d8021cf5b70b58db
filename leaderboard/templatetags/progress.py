"""Pending axes as a badge: which of a probe's axes are still being measured
(``leaderboard.selectors.progress``), shown on the board rows and the probe page."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()


def pending_axes_html(axes) -> SafeString:
    """A badge listing the pending axes ("transfer 1/2, steer pending"), or "" when none."""
    if not axes:
        return SafeString("")
    return format_html(
        '<li class="badge pending" title="still being measured: the other numbers are final; a'
        ' pending component is imputed until its runs finish">'
        "pending: {}</li>",
        ", ".join(a.label for a in axes),
    )


@register.simple_tag
def pending_axes_badge(axes):
    """``{% pending_axes_badge d.pending_axes %}``: the badge as an ``<li>``."""
    return pending_axes_html(axes)
