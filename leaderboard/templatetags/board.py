"""Template filters for the public pages: number formatting and a small, safe markdown renderer.

Formatting is plain f-strings (the board renders hundreds of cells; ``floatformat`` is slower).
The markdown renderer escapes everything first and only then adds a fixed set of tags, so a task
card can never inject HTML.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def num(value, digits=3):
    """A number with ``digits`` decimals, or an em dash when missing."""
    if value is None or value == "":
        return "—"
    try:
        return f"{float(value):.{int(digits)}f}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def pct(value, digits=0):
    if value is None:
        return "—"
    return f"{float(value) * 100:.{int(digits)}f}%"


@register.filter
def signed(value):
    """+3 / −2 / 0 (a typographic minus)."""
    if value is None:
        return ""
    value = int(value)
    return f"+{value}" if value > 0 else (f"−{-value}" if value < 0 else "±0")


@register.filter
def get(mapping, key):
    if not mapping:
        return None
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def pretty_json(value):
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def days(value: timedelta | None):
    if value is None:
        return "—"
    d = value.total_seconds() / 86400
    return f"{d:.1f} days" if d >= 1 else f"{value.total_seconds() / 3600:.0f} h"


@register.filter
def label(value):
    """snake_case → words."""
    return str(value).replace("_", " ")


# --------------------------------------------------------------------------- markdown, safely

_INLINE = [
    (re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*\*([^*]+)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![*\w])\*([^*\s][^*]*)\*(?!\w)"), r"<em>\1</em>"),
    # links: only http(s) targets; text and URL were escaped already
    (re.compile(r"\[([^\]]+)\]\((https?://[^)\s\"'<>]+)\)"), r'<a href="\2" rel="nofollow noopener">\1</a>'),
]


def _inline(text: str) -> str:
    out = escape(text)
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    return out


def render_markdown(text: str) -> str:
    """Headings, paragraphs, lists, fenced code, pipe tables and inline code/emphasis/links."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = "ul"
    table: list[list[str]] = []
    code: list[str] | None = None

    def flush():
        nonlocal para, items, table
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + f"</{list_tag}>")
        if table:
            head, *body = table
            body = [r for r in body if not all(re.fullmatch(r":?-{2,}:?", c.strip()) for c in r)]
            html = "<table class='card-table'><thead><tr>" + "".join(f"<th scope='col'>{_inline(c)}</th>" for c in head)
            html += "</tr></thead><tbody>"
            html += "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
            out.append(html + "</tbody></table>")
        para, items, table = [], [], []

    for line in (text or "").splitlines():
        if code is not None:
            if line.strip().startswith("```"):
                out.append("<pre><code>" + escape("\n".join(code)) + "</code></pre>")
                code = None
            else:
                code.append(line)
            continue
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            code = []
        elif m := re.match(r"^(#{1,6})\s+(.*)$", stripped):
            flush()
            level = min(len(m.group(1)) + 1, 6)  # the page owns <h1>
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
        elif m := re.match(r"^([-*+]|\d+[.)])\s+(.*)$", stripped):
            if para or table:
                flush()
            list_tag = "ol" if m.group(1)[0].isdigit() else "ul"
            items.append(m.group(2))
        elif stripped.startswith("|") and stripped.endswith("|"):
            if para or items:
                flush()
            table.append([c for c in stripped.strip("|").split("|")])
        elif not stripped:
            flush()
        elif items and line.startswith((" ", "\t")):
            items[-1] += " " + stripped
        else:
            if items or table:
                flush()
            para.append(stripped)
    if code is not None:
        out.append("<pre><code>" + escape("\n".join(code)) + "</code></pre>")
    flush()
    return "\n".join(out)


@register.filter
def markdown(text):
    return mark_safe(render_markdown(text))  # every piece of input went through escape()
