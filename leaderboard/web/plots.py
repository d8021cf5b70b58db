"""Server-side SVG charts: ROC curves, reliability diagrams and the history over quarters.

Pure functions from numbers to an SVG string (no JavaScript, no external assets). Every chart has a
<title> and <desc> for screen readers, labelled axes with ticks, and a legend; every piece of text
is XML-escaped here, so the returned markup is safe to embed as it is.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from django.utils.safestring import SafeString, mark_safe

#: Okabe–Ito, readable by colour-blind readers (yellow dropped: too light on white).
#: the legend's left edge (a legend spans the figure's width, not only the plot's)
LEGEND_X = 12
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000", "#999999")


@dataclass
class Series:
    label: str
    points: Sequence[tuple[float, float]]
    color: str | None = None
    dashed: bool = False
    markers: bool = False
    #: per-point tooltip text (shown by browsers on hover; read by screen readers)
    notes: Sequence[str] = field(default_factory=tuple)


@dataclass
class Axis:
    label: str
    lo: float
    hi: float
    ticks: Sequence[float]
    tick_labels: Sequence[str] | None = None


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if abs(x - round(x, 1)) < 1e-9 else f"{x:.2f}"


#: The legend's font size (board.css, ``svg.chart .legend``) and a generous average glyph width
#: for the system sans-serif fonts, in ems: used to keep every legend inside its figure.
LEGEND_FONT_PX = 11.5
GLYPH_EM = 0.62


def text_width(text: str, font_px: float = LEGEND_FONT_PX) -> float:
    """An upper estimate of the rendered width of ``text`` in px."""
    return len(text) * font_px * GLYPH_EM


def _fit(text: str, width: float, font_px: float = LEGEND_FONT_PX) -> str:
    """``text``, cut with an ellipsis so that it fits in ``width`` px (the full text stays in the
    entry's <title>)."""
    if text_width(text, font_px) <= width:
        return text
    keep = max(int(width / (font_px * GLYPH_EM)) - 1, 1)
    return text[:keep].rstrip() + "…"


def _thin(points: Sequence[tuple[float, float]], limit: int = 400) -> list[tuple[float, float]]:
    points = list(points)
    if len(points) <= limit:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def line_chart(
    *,
    title: str,
    description: str,
    x: Axis,
    y: Axis,
    series: Sequence[Series],
    diagonal: str | None = None,
    width: int = 440,
    height: int = 340,
) -> SafeString:
    """A line chart with axes, ticks, gridlines, an optional y = x reference and a legend."""
    # a stable id (same data, same markup) that differs between charts on one page
    digest = hashlib.sha1(repr((title, description, [(s.label, list(s.points)) for s in series])).encode())
    uid = f"chart-{digest.hexdigest()[:10]}"
    left, right, top, bottom = 56, 16, 34, 52
    legend_rows = len(series) + (1 if diagonal else 0)
    legend_h = 18 * legend_rows + 8
    plot_w, plot_h = width - left - right, height - top - bottom
    total_h = height + legend_h

    def px(v: float) -> float:
        return left + (v - x.lo) / (x.hi - x.lo or 1) * plot_w

    def py(v: float) -> float:
        return top + plot_h - (v - y.lo) / (y.hi - y.lo or 1) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {total_h}" '
        f'width="{width}" height="{total_h}" role="img" aria-labelledby="{uid}-t {uid}-d">',
        f'<title id="{uid}-t">{escape(title)}</title>',
        f'<desc id="{uid}-d">{escape(description)}</desc>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" class="chart-title">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#888"/>',
    ]
    labels = x.tick_labels or [_fmt(t) for t in x.ticks]
    for t, lab in zip(x.ticks, labels, strict=False):
        X = px(t)
        out.append(f'<line x1="{X:.1f}" y1="{top}" x2="{X:.1f}" y2="{top + plot_h}" class="grid"/>')
        out.append(
            f'<text x="{X:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{escape(lab)}</text>'
        )
    ylabels = y.tick_labels or [_fmt(t) for t in y.ticks]
    for t, lab in zip(y.ticks, ylabels, strict=False):
        Y = py(t)
        out.append(f'<line x1="{left}" y1="{Y:.1f}" x2="{left + plot_w}" y2="{Y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{left - 6}" y="{Y + 4:.1f}" text-anchor="end" class="tick">{escape(lab)}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2}" y="{top + plot_h + 38}" text-anchor="middle" class="axis-label">'
        f"{escape(x.label)}</text>"
    )
    out.append(
        f'<text transform="translate(16 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" '
        f'class="axis-label">{escape(y.label)}</text>'
    )
    if diagonal:
        lo, hi = max(x.lo, y.lo), min(x.hi, y.hi)
        out.append(
            f'<line x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" y2="{py(hi):.1f}" '
            'stroke="#777" stroke-dasharray="4 4" stroke-width="1"/>'
        )
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        pts = _thin(s.points)
        if not pts:
            continue
        coords = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in pts)
        dash = ' stroke-dasharray="6 3"' if s.dashed else ""
        out.append(f"<g><title>{escape(s.label)}</title>")
        if len(pts) > 1:
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        if s.markers or len(pts) == 1:
            for j, (a, b) in enumerate(pts):
                note = s.notes[j] if j < len(s.notes) else f"{s.label}: {_fmt(a)}, {b:.3f}"
                out.append(
                    f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="3.5" fill="{color}">'
                    f"<title>{escape(note)}</title></circle>"
                )
        out.append("</g>")
    # legend below the plot, inside the figure: one entry per row, a label too long for the
    # figure's width cut with an ellipsis (the full label is the entry's <title>)
    ly = height + 4
    entries = [(s.label, s.color or PALETTE[i % len(PALETTE)], s.dashed) for i, s in enumerate(series)]
    if diagonal:
        entries.append((diagonal, "#777", True))
    lx = LEGEND_X
    out.append('<g class="chart-legend">')
    for label, color, dashed in entries:
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        shown = _fit(label, width - lx - 28 - LEGEND_X)
        out.append(
            f"<g><title>{escape(label)}</title>"
            f'<line x1="{lx}" y1="{ly + 6}" x2="{lx + 22}" y2="{ly + 6}" stroke="{color}" stroke-width="2"{dash}/>'
            f'<text x="{lx + 28}" y="{ly + 10}" class="legend">{escape(shown)}</text></g>'
        )
        ly += 18
    out.append("</g>")
    out.append("</svg>")
    return mark_safe("".join(out))  # every text above went through escape()


def _unit_ticks() -> list[float]:
    return [i / 5 for i in range(6)]


def roc_svg(
    curves: dict[str, Sequence[Sequence[float]]],
    *,
    title: str = "ROC curves (test split)",
    description: str | None = None,
) -> SafeString:
    """ROC curves, one per task (or one per probe on a task, overlaid): false-positive rate
    against true-positive rate."""
    series = [
        Series(label=label, points=[(float(p[0]), float(p[1])) for p in pts if len(p) >= 2])
        for label, pts in curves.items()
    ]
    names = ", ".join(curves) or "no task"
    return line_chart(
        title=title,
        description=description
        or f"ROC curve of the probe on the test split of {names}; the dashed diagonal is chance.",
        x=Axis("False-positive rate", 0.0, 1.0, _unit_ticks()),
        y=Axis("True-positive rate", 0.0, 1.0, _unit_ticks()),
        series=series,
        diagonal="chance",
    )


def reliability_svg(
    bins_by_task: dict[str, Sequence[dict]], *, title: str = "Reliability diagram"
) -> SafeString:
    """Mean predicted probability against the observed positive rate per probability bin."""
    series = []
    for label, bins in bins_by_task.items():
        pts, notes = [], []
        for b in bins:
            if not b.get("n") or b.get("mean_prob") is None or b.get("positive_rate") is None:
                continue
            pts.append((float(b["mean_prob"]), float(b["positive_rate"])))
            notes.append(
                f"{label}: bin {_fmt(b.get('lo', 0))}–{_fmt(b.get('hi', 1))}, n = {b['n']}, "
                f"mean p = {b['mean_prob']:.3f}, positive rate = {b['positive_rate']:.3f}"
            )
        series.append(Series(label=label, points=pts, markers=True, notes=notes))
    return line_chart(
        title=title,
        description="Observed positive rate against mean predicted probability in ten equal-width "
        "probability bins; points on the dashed diagonal are perfectly calibrated.",
        x=Axis("Mean predicted probability", 0.0, 1.0, _unit_ticks()),
        y=Axis("Observed positive rate", 0.0, 1.0, _unit_ticks()),
        series=series,
        diagonal="perfect calibration",
    )


def history_svg(points: Sequence[dict], *, title: str = "History over quarters") -> SafeString:
    """AUROC per quarterly cycle: holdout, test and the reference it is compared against.

    ``points``: [{"quarter", "holdout_auroc", "test_auroc", "reference_auroc", "outcome"}] in
    quarter order (one per quarter).
    """
    quarters = [p["quarter"] for p in points]
    n = len(quarters)
    xs = list(range(n))
    values = [
        p[k]
        for p in points
        for k in ("holdout_auroc", "test_auroc", "reference_auroc")
        if p.get(k) is not None
    ]
    lo = min([*values, 0.5])
    y_lo = max(0.0, round(int(lo * 10) / 10, 1))
    ticks = [round(y_lo + i * 0.1, 1) for i in range(int(round((1.0 - y_lo) * 10)) + 1)]

    def series(key: str, label: str, *, dashed: bool = False) -> Series:
        pts = [(i, p[key]) for i, p in zip(xs, points, strict=True) if p.get(key) is not None]
        notes = [
            f"{p['quarter']}: {label} {p[key]:.3f} ({p.get('outcome', '')})"
            for p in points
            if p.get(key) is not None
        ]
        return Series(label=label, points=pts, dashed=dashed, markers=True, notes=notes)

    return line_chart(
        title=title,
        description="AUROC of the probe in each quarterly re-evaluation: on the freshly minted holdout, "
        "on the fixed test split, and the reference AUROC each cycle compares against.",
        x=Axis("Quarter", -0.5, max(n - 0.5, 0.5), xs, quarters),
        y=Axis("AUROC", y_lo, 1.0, ticks),
        series=[  # drawn in this order: the holdout line on top
            series("reference_auroc", "reference AUROC", dashed=True),
            series("test_auroc", "test AUROC"),
            series("holdout_auroc", "holdout AUROC"),
        ],
    )


def steer_svg(
    rows: Sequence[tuple[str, float, Sequence[float]]],
    *,
    title: str,
    x_label: str,
    width: int = 440,
) -> SafeString:
    """Direction utility: per row (a task), the probe direction's effect (a filled diamond) against
    the same intervention along random directions (grey dots, with their mean ± 1 sd as a bar)."""
    digest = hashlib.sha1(repr((title, [(r[0], r[1], list(r[2])) for r in rows])).encode())
    uid = f"chart-{digest.hexdigest()[:10]}"
    left, right, top, row_h = 150, 16, 34, 26
    plot_w = width - left - right
    plot_h = row_h * max(len(rows), 1)
    height = top + plot_h + 80
    values = [v for _, effect, randoms in rows for v in (effect, *randoms)] or [0.0, 1.0]
    lo, hi = min(min(values), 0.0), max(max(values), 0.0)
    pad = (hi - lo) * 0.08 or 1.0
    lo, hi = lo - pad, hi + pad

    def px(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot_w

    described = "; ".join(
        f"{label}: effect {effect:.3g}, random mean {sum(r) / len(r):.3g} over {len(r)} directions"
        for label, effect, r in rows
        if r
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="{uid}-t {uid}-d">',
        f'<title id="{uid}-t">{escape(title)}</title>',
        f'<desc id="{uid}-d">{escape(described or "no task with a readout")}</desc>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" class="chart-title">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#888"/>',
    ]
    step = (hi - lo) / 4
    for i in range(5):
        t = lo + i * step
        X = px(t)
        out.append(f'<line x1="{X:.1f}" y1="{top}" x2="{X:.1f}" y2="{top + plot_h}" class="grid"/>')
        out.append(
            f'<text x="{X:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{t:.2g}</text>'
        )
    zero = px(0.0)
    out.append(f'<line x1="{zero:.1f}" y1="{top}" x2="{zero:.1f}" y2="{top + plot_h}" stroke="#777"/>')
    for i, (label, effect, randoms) in enumerate(rows):
        Y = top + row_h * i + row_h / 2
        out.append(
            f'<text x="{left - 6}" y="{Y + 4:.1f}" text-anchor="end" class="tick">{escape(label[:24])}</text>'
        )
        if randoms:
            mean = sum(randoms) / len(randoms)
            sd = (sum((r - mean) ** 2 for r in randoms) / max(len(randoms) - 1, 1)) ** 0.5
            out.append(
                f'<line x1="{px(mean - sd):.1f}" y1="{Y:.1f}" x2="{px(mean + sd):.1f}" y2="{Y:.1f}" '
                f'stroke="{PALETTE[7]}" stroke-width="6" opacity="0.5"><title>random mean ± 1 sd</title></line>'
            )
            for r in randoms:
                out.append(f'<circle cx="{px(r):.1f}" cy="{Y:.1f}" r="2.5" fill="{PALETTE[7]}"/>')
        X = px(effect)
        out.append(
            f'<path d="M{X:.1f},{Y - 6:.1f} L{X + 6:.1f},{Y:.1f} L{X:.1f},{Y + 6:.1f} L{X - 6:.1f},{Y:.1f} Z" '
            f'fill="{PALETTE[1]}"><title>{escape(f"{label}: probe direction {effect:.4g}")}</title></path>'
        )
    out.append(
        f'<text x="{left + plot_w / 2}" y="{top + plot_h + 36}" text-anchor="middle" class="axis-label">'
        f"{escape(x_label)}</text>"
    )
    # the legend: two rows from the figure's left edge, so that it stays inside the figure
    ly, lx = top + plot_h + 52, LEGEND_X
    out.append(
        '<g class="chart-legend">'
        f'<path d="M{lx + 6},{ly - 5} L{lx + 11},{ly} L{lx + 6},{ly + 5} L{lx + 1},{ly} Z" '
        f'fill="{PALETTE[1]}"/><text x="{lx + 16}" y="{ly + 4}" class="legend">probe direction</text>'
        f'<circle cx="{lx + 6}" cy="{ly + 18}" r="3" fill="{PALETTE[7]}"/>'
        f'<text x="{lx + 16}" y="{ly + 22}" class="legend">random directions (bar: mean ± 1 sd)</text></g>'
    )
    out.append("</svg>")
    return mark_safe("".join(out))  # every text above went through escape()


def attack_svg(curves: dict[str, Sequence[dict]], *, title: str = "Recall under attack") -> SafeString:
    """Recall of the test positives (at the clean 1%-FPR threshold) after each checkpoint step of
    the soft-suffix attack, one line per task; step 0 is the random suffix before any step."""
    series = [
        Series(
            label=task,
            points=[(float(c["step"]), float(c["recall"])) for c in curve],
            markers=True,
            notes=[f"{task}: step {c['step']}, recall {float(c['recall']):.3f}" for c in curve],
        )
        for task, curve in curves.items()
    ]
    last = max([float(c["step"]) for curve in curves.values() for c in curve] or [1.0]) or 1.0
    ticks = [round(last * i / 5) for i in range(6)]
    return line_chart(
        title=title,
        description="Recall of the probe's test positives at its clean 1%-FPR threshold after each "
        "checkpoint step of the universal soft-suffix attack, per task (step 0: the random starting "
        "suffix).",
        x=Axis("Adam steps on the suffix", 0.0, last, ticks),
        y=Axis("Recall of the test positives", 0.0, 1.0, _unit_ticks()),
        series=series,
    )


def graded_svg(
    curves: dict[str, Sequence[Sequence[float]]], *, title: str = "The graded attack"
) -> SafeString:
    """Recall of the test positives relative to the recall with the unoptimised vectors inserted,
    against the radius ε (log scale), one line per task and seed: ``curves`` maps "task · seed s"
    to its (ε, relative recall) points. The area under a line is that seed's Goodhart resistance."""
    radii = sorted({float(p[0]) for points in curves.values() for p in points}) or [0.01, 1.0]
    lo, hi = math.log10(radii[0]), math.log10(radii[-1])
    series = [
        Series(
            label=label,
            points=[(math.log10(float(eps)), float(rel)) for eps, rel in points],
            markers=True,
            notes=[f"{label}: ε {float(eps):g}, relative recall {float(rel):.3f}" for eps, rel in points],
        )
        for label, points in curves.items()
    ]
    ticks = [math.log10(r) for r in radii]
    return line_chart(
        title=title,
        description="Recall of the probe's test positives at its clean 1%-FPR threshold, relative to the "
        "recall with the unoptimised vectors inserted, against the radius ε of the ball each inserted "
        "vector is held in (in token-embedding norms, log scale), per task and seed.",
        x=Axis(
            "ε, radius in token-embedding norms (log scale)",
            lo,
            hi if hi > lo else lo + 1,
            ticks,
            [f"{r:g}" for r in radii],
        ),
        y=Axis("Recall relative to the insertion's", 0.0, 1.0, _unit_ticks()),
        series=series,
    )
