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
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from leaderboard.presentation import duration_text
from leaderboard.templatetags.progress import pending_axes_html

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
def g(value):
    """A number in its shortest form: 5.0 → 5, 0.3 → 0.3."""
    if value is None:
        return "—"
    return f"{float(value):g}"


@register.filter
def sig(value, digits=4):
    """A number with ``digits`` significant digits (latencies span 0.01 ms to seconds)."""
    if value is None or value == "":
        return "—"
    try:
        return f"{float(value):.{int(digits)}g}"
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
def sub(value, other):
    try:
        return float(value) - float(other)
    except (TypeError, ValueError):
        return None


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
def duration(seconds: float | None):
    """Seconds in words: "45 s", "12 min", "2 h 05 min"."""
    return duration_text(seconds)


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
    out: str = escape(text)
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
            html = '<table class="card-table"><thead><tr>' + "".join(
                f'<th scope="col">{_inline(c)}</th>' for c in head
            )
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
            table.append([c.strip() for c in stripped.strip("|").split("|")])
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


# --------------------------------------------------------------------------- the board's rows
# The board renders up to a hundred rows of ten cells on every request; built here with escape()
# it takes a few milliseconds, where the same markup in template tags took about a hundred.


def _e(value) -> str:
    return escape("" if value is None else str(value))


_REFERENCE = SafeString(
    '<li class="badge ref" title="A reference probe shipped by the maintainers">reference</li>'
)
_REPRODUCED = SafeString(
    '<li class="badge ok" title="Our worker reran the recipe and matched the artifact">reproduced</li>'
)
_LEAKAGE = SafeString(
    '<li class="badge bad" title="A confirmed leakage record is attached to this probe">leakage detected</li>'
)


@register.simple_tag
def row_badges(row) -> SafeString:
    """``{% row_badges row %}``: a board row's badges (reference, reproduced, stable, deprecated,
    leakage, declared≠measured, pending axes) as one ``<ul>``, or nothing when it has none. The one
    place they are written: the board table, the task page and the base model page use it."""
    out = []
    if row.is_reference:
        out.append(
            format_html(
                '<li class="badge ref" title="A reference probe shipped by the maintainers">reference</li>'
            )
        )
    if row.reproduced:
        out.append(_REPRODUCED)
    if row.stable:
        out.append(
            format_html(
                '<li class="badge ok" title="Held in {} consecutive quarterly re-evaluations">stable {}Q</li>',
                row.stability_quarters,
                row.stability_quarters,
            )
        )
    if row.deprecated:
        out.append(format_html('<li class="badge bad" title="{}">deprecated</li>', row.deprecated_reason))
    if row.leakage:
        out.append(_LEAKAGE)
    if row.declared_mismatch:
        gaps = "; ".join(
            f"{m}: declared {num(g.get('declared'))}, measured {num(g.get('measured'))}"
            for m, g in row.declared_mismatch.items()
        )
        out.append(format_html('<li class="badge warn" title="{}">declared≠measured</li>', gaps))
    out.append(pending_axes_html(getattr(row, "pending_axes", None)))  # selectors.progress
    if not any(out):
        return SafeString("")
    return format_html('<ul class="badges">{}</ul>', format_html_join("", "{}", ((item,) for item in out)))


@register.simple_tag
def lift(value, ci=None) -> str:
    """A lift over text with its 95% interval in the title; ``≈0`` marks an interval that
    includes 0 (the probe is not shown to beat the text-only baseline)."""
    if value is None:
        return "—"
    if not ci:
        return num(value)
    lo, hi = ci
    if lo <= 0 <= hi:
        return format_html(
            '{} <abbr class="lift-ns" title="95% interval [{}, {}] includes 0: not shown to beat the'
            ' strongest text-only baseline">≈0</abbr>',
            num(value),
            num(lo),
            num(hi),
        )
    return format_html('<span title="95% interval [{}, {}]">{}</span>', num(lo), num(hi), num(value))


def _component_cell(row, key: str, label: str, measured_only: bool) -> str:
    if key == "recall":  # the operating point: a measurement, not a ProbeScore component
        return f'<td class="num recall" title="{_e(label)}">{num(row.recall)}</td>'
    if key == "lift":  # lift over text: a measurement, not a ProbeScore component
        return (
            f'<td class="num lift" title="{_e(label)}">{lift(row.lift_over_text, row.lift_over_text_ci)}</td>'
        )
    if key == "controlled":  # beside the ProbeScore, never in it
        cell = lift(row.controlled_auroc, row.controlled_auroc_ci)
        return f'<td class="num controlled" title="{_e(label)}">{cell}</td>'
    if key == "borda":  # a second order of the category board, beside the ProbeScore
        return f'<td class="num borda" title="{_e(label)}">{row.borda_rank if row.borda_rank is not None else "—"}</td>'
    if key == "delta":
        if row.rank_delta is None:
            return '<td class="num delta na"><abbr title="not measured in the latest quarterly cycle">—</abbr></td>'
        where = f"{label} · {row.rank_delta_quarter}"
        return f'<td class="num delta" title="{_e(where)}">{row.rank_delta:+d}</td>'
    if key == "utility":  # direction utility: beside the ProbeScore, never in it
        if row.direction_utility is None:
            return '<td class="num utility na"><abbr title="not measured: no readout task or not a linear probe on a decoder">n/a</abbr></td>'
        return f'<td class="num utility" title="{_e(label)}">{num(row.direction_utility)}</td>'
    if key == "stress":  # beside the ProbeScore, never in it
        if row.stress_auroc is None:
            return '<td class="num stress na"><abbr title="not measured: no task of its with a stress split, or pending">n/a</abbr></td>'
        return f'<td class="num stress" title="{_e(label)}">{num(row.stress_auroc)}</td>'
    c = row.components.get(key)
    if not c:
        return '<td class="num">—</td>'
    contribution = f"<small>+{num(c.get('contribution'))}</small>"
    if key == "auroc_ea" and row.ea_not_applicable:
        note = c.get("note") or "not applicable to eval-awareness probes: raw AUROC used"
        return f'<td class="num na"><abbr title="{_e(note)}">n/a</abbr>{contribution}</td>'
    if c.get("imputed") and measured_only:
        return (
            f'<td class="num imputed excluded"><span title="{_e(c.get("note"))}">imputed</span>'
            "<small>excluded</small></td>"
        )
    title = label
    if c.get("raw") is not None:
        title += f" · measured {sig(c['raw'])} ms" if key == "latency" else f" · measured {num(c['raw'], 4)}"
    if c.get("note"):
        title += f" · {c['note']}"
    mark = f'<abbr class="imp-mark" title="imputed: {_e(c.get("note"))}">*</abbr>' if c.get("imputed") else ""
    ci = ""
    if key == "auroc" and row.auroc_ci:
        kind = " (mean of the per-task bootstrap bounds)" if row.auroc_ci_kind == "mean-of-tasks" else ""
        ci = f'<small class="ci" title="95% interval{kind}">[{num(row.auroc_ci[0], 2)}, {num(row.auroc_ci[1], 2)}]</small>'
    cls = "num imputed" if c.get("imputed") else "num"
    return f'<td class="{cls}" title="{_e(title)}">{num(c.get("value"))}{mark}{contribution}{ci}</td>'


@register.simple_tag
def board_rows(board, rows, headers):
    """The <tr> elements of the board table (see _board_table.html for the header)."""
    from django.urls import reverse

    measured_only = board.query.measured_only
    compare = board.compare.version if board.compare else None
    columns = [(h["key"], h["label"], bool(h.get("flat"))) for h in headers[1:]]
    probe_url = reverse("leaderboard:probe", args=["__slug__"])
    model_url = reverse("leaderboard:model", args=["__slug__"])
    out = []
    for row in rows:
        classes = ("deprecated" if row.deprecated else "") + (" leaked" if row.leakage else "")
        rank = str(row.rank) if row.rank else '<span title="deprecated entries are not ranked">—</span>'
        interval = getattr(row, "rank_interval", None) if not row.deprecated else None
        if interval:
            classes += f" tie-group tg{interval['tie_group'] % 2}"
            rank += (
                f'<small class="rank-ci" title="95% rank interval (paired bootstrap over the test rows); '
                f'tie group {interval["tie_group"]}">{interval["rank_lo"]}–{interval["rank_hi"]}</small>'
            )
            if interval["tied_for_first"]:
                rank += (
                    '<span class="badge ok tied" title="its 95% rank interval includes 1, as does another '
                    "entry's: the data do not single out a leader\">tied for first</span>"
                )
        if compare:
            change = row.rank_change
            if change is not None:
                direction = " up" if change > 0 else (" down" if change < 0 else "")
                rank += (
                    f'<small class="change{direction}" title="rank {row.compare_rank} under {_e(compare)} '
                    f'(total {num(row.compare_total)})">{signed(change)}</small>'
                )
            else:
                rank += f'<small class="change" title="not ranked under {_e(compare)}">new</small>'
        meta = f"v{row.version} · {_e(row.license)}"
        if row.authors:
            meta += " · " + _e(", ".join(str(a) for a in row.authors))
        if board.category is None:
            meta += " · " + _e(label(row.category))
        reason = (
            f'<div class="reason">Deprecated: {_e(row.deprecated_reason)}</div>'
            if row.deprecated and row.deprecated_reason
            else ""
        )
        if measured_only:
            total = f"<strong>{num(row.measured_total)}</strong><small>total {num(row.total)}</small>"
        else:
            total = f"<strong>{num(row.total)}</strong>"
            if interval:
                total += (
                    f'<small class="ci" title="95% bootstrap interval of the ProbeScore">'
                    f"[{num(interval['score_lo'], 2)}, {num(interval['score_hi'], 2)}]</small>"
                )
        cells = "".join(
            # a column whose entries all show one value is muted (the header and a note say why)
            _component_cell(row, key, lab, measured_only).replace('<td class="', '<td class="flat ', 1)
            if flat
            else _component_cell(row, key, lab, measured_only)
            for key, lab, flat in columns
        )
        out.append(
            f'<tr class="{classes.strip()}"><td class="num rank">{rank}</td>'
            f'<th scope="row" class="probe"><input type="checkbox" class="pick" name="p" value="{_e(row.probe)}" '
            f'form="compare-form" aria-label="pick {_e(row.name)} to compare">'
            f'<a href="{probe_url.replace("__slug__", _e(row.probe))}">{_e(row.name)}</a>'
            f'<div class="meta">{meta}</div>{row_badges(row)}{reason}</th>'
            f'<td><a href="{model_url.replace("__slug__", _e(row.base_model))}">{_e(row.base_model_name)}</a></td>'
            f'<td class="num total">{total}</td>{cells}</tr>'
        )
    return mark_safe("\n".join(out))  # every value above went through _e()/escape() or num()
