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
from django.urls import reverse
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from evaluator.metrics import metric_table
from leaderboard.presentation import duration_text, spec_description_shown
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
def breakable(value) -> SafeString:
    """A header label escaped, with a line-break opportunity after each "/" and before each "@"
    ("Lift/text", "Recall@1%FPR"), so a narrow column's header wraps there rather than widening it."""
    text = str(escape(value))
    return mark_safe(text.replace("/", "/<wbr>").replace("@", "<wbr>@"))  # noqa: S308 - escaped above


@register.filter
def spec_description(value) -> str:
    """A weights spec's description as the pages show it (presentation.spec_description_shown)."""
    return spec_description_shown(str(value or ""))


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
def delta(value, digits=3):
    """A difference with its sign: +0.012 / −0.034 (a typographic minus), or an em dash."""
    if value is None or value == "":
        return "—"
    text = f"{float(value):+.{int(digits)}f}"
    return text.replace("-", "−")


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


# --------------------------------------------------------------------------- a board row's badges


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


# --------------------------------------------------------------------------- metric cells


def _percent(value) -> str:
    try:
        return pct(value, 1)
    except (TypeError, ValueError):
        return str(value)


#: each of ``metric_table.FORMATS``: how a value is written
_FORMATS = {
    "digits": lambda v: num(v),
    "percent": _percent,
    "ms": lambda v: f"{sig(v)} ms",
}


def metric_text(value, fmt: str = "digits", ci=None) -> str:
    """A metric's value as the pages write it (``fmt``: one of ``metric_table.FORMATS``; "—" when
    it is missing), with its 95% interval ``ci`` in the title where one is given; ``≈0`` marks an
    interval that includes 0 (the probe is not shown to beat the text)."""
    if value is None:
        return "—"
    text = _FORMATS[fmt](value)
    if not ci:
        return text
    lo, hi = ci
    if lo <= 0 <= hi:
        return format_html(
            '{} <abbr class="lift-ns" title="95% interval [{}, {}] includes 0: not shown to beat the'
            ' strongest text-only baseline">≈0</abbr>',
            text,
            num(lo),
            num(hi),
        )
    return format_html('<span title="95% interval [{}, {}]">{}</span>', num(lo), num(hi), text)


@register.simple_tag
def metric_cell(value, fmt="digits", ci=None, css="num", title="", na="") -> SafeString:
    """``{% metric_cell value fmt ci=… %}``: the one way a metric's value becomes a table cell (the
    board's metric columns, the compare page, the probe and task pages): a ``<td>`` of class
    ``css`` holding :func:`metric_text`, titled ``title``; a missing value with an ``na`` note shows
    as "n/a" with the note."""
    if value is None and na:
        return format_html('<td class="{} na"><abbr title="{}">n/a</abbr></td>', css, na)
    if title:
        return format_html('<td class="{}" title="{}">{}</td>', css, title, metric_text(value, fmt, ci))
    return format_html('<td class="{}">{}</td>', css, metric_text(value, fmt, ci))


@register.simple_tag
def metric_label(name: str) -> str:
    """``{% metric_label "recall_at_1pct_fpr" %}``: a metric's label, from the metric table."""
    return metric_table.metric(name).label


@register.simple_tag
def metric_definition(name: str) -> str:
    """``{% metric_definition "recall_at_1pct_fpr" %}``: a metric's definition, from the metric table."""
    return metric_table.metric(name).definition


# --------------------------------------------------------------------------- the board's rows
# The board renders up to a hundred rows of twenty cells on every request, each cell through
# format_html (the metric cells through metric_cell).


def _component_cell(row, key: str, label: str, measured_only: bool, flat: str) -> SafeString:
    c = row.components.get(key)
    if not c:
        return format_html('<td class="{}num">—</td>', flat)
    contribution = format_html("<small>+{}</small>", num(c.get("contribution")))
    note = c.get("note") or ""
    if key == "auroc_ea" and row.ea_not_applicable:
        note = note or "not applicable to eval-awareness probes: raw AUROC used"
        return format_html(
            '<td class="{}num na"><abbr title="{}">n/a</abbr>{}</td>', flat, note, contribution
        )
    if c.get("imputed") and measured_only:
        return format_html(
            '<td class="{}num imputed excluded"><span title="{}">imputed</span><small>excluded</small></td>',
            flat,
            note,
        )
    title = label
    if c.get("raw") is not None:
        title += f" · measured {sig(c['raw'])} ms" if key == "latency" else f" · measured {num(c['raw'], 4)}"
    if note:
        title += f" · {note}"
    mark = (
        format_html('<abbr class="imp-mark" title="imputed: {}">*</abbr>', note) if c.get("imputed") else ""
    )
    ci: SafeString | str = ""
    if key == "auroc" and row.auroc_ci:
        kind = " (mean of the per-task bootstrap bounds)" if row.auroc_ci_kind == "mean-of-tasks" else ""
        ci = format_html(
            '<small class="ci" title="95% interval{}">[{}, {}]</small>',
            kind,
            num(row.auroc_ci[0], 2),
            num(row.auroc_ci[1], 2),
        )
    cls = "num imputed" if c.get("imputed") else "num"
    return format_html(
        '<td class="{}{}" title="{}">{}{}{}{}</td>',
        flat,
        cls,
        title,
        num(c.get("value")),
        mark,
        contribution,
        ci,
    )


def _value_cell(row, column, measured_only: bool) -> SafeString:
    """One value cell of a board row: a metric's own column (:func:`metric_cell`), one of the
    category board's other orders, or a component. A column whose entries all show one value is
    muted (the header and a note under the table say why)."""
    flat = "flat " if column["flat"] else ""
    m = column["metric"]
    if m is not None:
        return metric_cell(
            row.metrics.get(m.name),
            m.fmt,
            ci=row.metric_cis.get(m.name),
            css=f"{flat}num {column['key']}",
            title=m.label,
            na=m.column.na,
        )
    if column["key"] == "borda":  # a second order of the category board, beside the ProbeScore
        borda = row.borda_rank if row.borda_rank is not None else "—"
        return format_html('<td class="{}num borda" title="{}">{}</td>', flat, column["label"], borda)
    if column["key"] == "delta":
        if row.rank_delta is None:
            return format_html(
                '<td class="{}num delta na"><abbr title="not measured in the latest quarterly cycle">—</abbr></td>',
                flat,
            )
        where = f"{column['label']} · {row.rank_delta_quarter}"
        return format_html('<td class="{}num delta" title="{}">{}</td>', flat, where, f"{row.rank_delta:+d}")
    return _component_cell(row, column["key"], column["label"], measured_only, flat)


_NOT_RANKED = SafeString('<span title="deprecated entries are not ranked">—</span>')


def _rank_cell(row, compare: str | None) -> SafeString:
    classes = ("deprecated" if row.deprecated else "") + (" leaked" if row.leakage else "")
    if row.rank:
        rank = format_html("{}", row.rank)
    else:
        rank = _NOT_RANKED
    interval = getattr(row, "rank_interval", None) if not row.deprecated else None
    if interval:
        classes += f" tie-group tg{interval['tie_group'] % 2}"
        rank = format_html(
            '{}<small class="rank-ci" title="95% rank interval (paired bootstrap over the test rows); '
            'tie group {}">{}–{}</small>',
            rank,
            interval["tie_group"],
            interval["rank_lo"],
            interval["rank_hi"],
        )
        if interval["tied_for_first"]:
            rank = format_html(
                '{}<span class="badge ok tied" title="its 95% rank interval includes 1, as does another '
                "entry's: the data do not single out a leader\">tied for first</span>",
                rank,
            )
    if compare:
        change = row.rank_change
        if change is not None:
            direction = " up" if change > 0 else (" down" if change < 0 else "")
            rank = format_html(
                '{}<small class="change{}" title="rank {} under {} (total {})">{}</small>',
                rank,
                direction,
                row.compare_rank,
                compare,
                num(row.compare_total),
                signed(change),
            )
        else:
            rank = format_html(
                '{}<small class="change" title="not ranked under {}">new</small>', rank, compare
            )
    return format_html('<tr class="{}"><td class="num rank">{}</td>', classes.strip(), rank)


def _total_cell(row, measured_only: bool) -> SafeString:
    if measured_only:
        return format_html(
            '<td class="num total"><strong>{}</strong><small>total {}</small></td>',
            num(row.measured_total),
            num(row.total),
        )
    interval = getattr(row, "rank_interval", None) if not row.deprecated else None
    if interval:
        return format_html(
            '<td class="num total"><strong>{}</strong><small class="ci" title="95% bootstrap interval of the'
            ' ProbeScore">[{}, {}]</small></td>',
            num(row.total),
            num(interval["score_lo"], 2),
            num(interval["score_hi"], 2),
        )
    return format_html('<td class="num total"><strong>{}</strong></td>', num(row.total))


@register.simple_tag
def board_rows(board, rows, headers) -> SafeString:
    """The <tr> elements of the board table (see _board_table.html for the header)."""
    measured_only = board.query.measured_only
    compare = board.compare.version if board.compare else None
    columns = [
        {"key": h["key"], "label": h["label"], "flat": bool(h.get("flat")), "metric": h.get("metric")}
        for h in headers[1:]
    ]
    probe_url = reverse("leaderboard:probe", args=["__slug__"])
    model_url = reverse("leaderboard:model", args=["__slug__"])
    out = []
    for row in rows:
        meta = f"v{row.version} · {row.license}"
        if row.authors:
            meta += " · " + ", ".join(str(a) for a in row.authors)
        if board.category is None:
            meta += " · " + label(row.category)
        reason = (
            format_html('<div class="reason">Deprecated: {}</div>', row.deprecated_reason)
            if row.deprecated and row.deprecated_reason
            else ""
        )
        probe = format_html(
            '<th scope="row" class="probe"><input type="checkbox" class="pick" name="p" value="{}" '
            'form="compare-form" aria-label="pick {} to compare"><a href="{}">{}</a>'
            '<div class="meta">{}</div>{}{}</th>',
            row.probe,
            row.name,
            probe_url.replace("__slug__", row.probe),
            row.name,
            meta,
            row_badges(row),
            reason,
        )
        model = format_html(
            '<td><a href="{}">{}</a></td>',
            model_url.replace("__slug__", row.base_model),
            row.base_model_name,
        )
        cells = [_value_cell(row, c, measured_only) for c in columns]
        out.append(
            format_html(
                "{}{}{}{}" + "{}" * len(cells) + "</tr>",
                _rank_cell(row, compare),
                probe,
                model,
                _total_cell(row, measured_only),
                *cells,
            )
        )
    return format_html("\n".join(["{}"] * len(out)), *out)
