"""What the pages show in words: component labels, formula text and the policy numbers the
methodology page explains. No database access; selectors and views import it, templates render it.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from evaluator.data.registry.weights import MAX_COMPONENT_WEIGHT
from evaluator.metrics import metric_table
from evaluator.metrics.metric_table import DECLARED_GAP, Metric
from evaluator.metrics.metrics import ECE_BINS
from evaluator.metrics.scoring import ECE_RANGE, LATENCY_RANGE_MS, RHO_RANGE
from leaderboard.policy import (
    DEPRECATE_POINTS,
    DIFF_POINTS,
    LEAKAGE_POINTS,
    REVIEW_GOAL_DAYS,
    STABILITY_MIN_QUARTERS,
)

#: The policy numbers (norms, re-evaluation, leakage; docs/METHODOLOGY.md) that the pages explain
#: (the methodology page renders these, never a number written in a template), from the modules
#: that apply them (leaderboard.policy, evaluator). AUROC "points" are AUROC × 100.
POLICY = {
    "max_component_weight": MAX_COMPONENT_WEIGHT,
    "diff_drop_points": DIFF_POINTS,
    "deprecate_drop_points": DEPRECATE_POINTS,
    "stability_min_quarters": STABILITY_MIN_QUARTERS,
    "declared_gap_points": DECLARED_GAP * 100,
    "leakage_test_over_holdout_points": LEAKAGE_POINTS,
    "review_goal_days": REVIEW_GOAL_DAYS,
    "ece_range": ECE_RANGE,
    "latency_range_ms": LATENCY_RANGE_MS,
    "rho_range": RHO_RANGE,
}

COMPONENT_LABELS = {
    "auroc": "AUROC",
    "auroc_ea": "AUROC (EA-corrected)",
    "auroc_ds": "AUROC (dist. shift)",
    "calibration": "Calibration",
    "rho_ce": "Transfer ρ",
    "latency": "Latency",
    "license": "License",
    "goodhart": "Goodhart resistance",
}
COMPONENT_SHORT = {
    "auroc": "AUROC",
    "auroc_ea": "AUROC-EA",
    "auroc_ds": "AUROC-DS",
    "calibration": "Calib.",
    "rho_ce": "ρ CE",
    "latency": "Latency",
    "license": "License",
    "goodhart": "Goodhart",
}
#: How each component's value is computed from what was measured. The numbers in
#: these strings come from evaluator.metrics.scoring's clamp ranges.
COMPONENT_FORMULAS = {
    "auroc": "mean test-split AUROC over the category's active tasks",
    "auroc_ea": "AUROC counting only pairs inside the same eval-awareness reference-probe quintile",
    "auroc_ds": "mean AUROC on the tasks' distribution-shift splits",
    "calibration": f"1 − 2·ECE, ECE clamped to [{ECE_RANGE[0]:g}, {ECE_RANGE[1]:g}] ({ECE_BINS} equal-width bins)",
    "rho_ce": f"mean Pearson ρ of word-ablation effects across base models, clamped to "
    f"[{RHO_RANGE[0]:g}, {RHO_RANGE[1]:g}]",
    "latency": f"1 − log10(ms)/{math.log10(LATENCY_RANGE_MS[1]):g}, ms clamped to "
    f"[{LATENCY_RANGE_MS[0]:g}, {LATENCY_RANGE_MS[1]:g}]",
    "license": "the openness score L of the probe's license (registry)",
    "goodhart": "area under the graded attack's relative-recall curve over log ε (protocol p2 on; under p1 the "
    "recall under the soft-suffix attack ÷ the clean recall), mean over seeds and tasks",
}


#: The board's columns that are not a metric's own explained, in one place: the board's header
#: tooltips and the methodology page's column table both read this (through :func:`column_help`;
#: a test checks that every column the board shows is explained there). Keys are the board's
#: column keys (``rank``, ``score``, ``measured``, the COMPONENTS, ``borda``, ``delta``); a metric's
#: own column (``recall``, ``lift``, …) is explained by its row of the metric table. Each entry says
#: what the number is, its unit, its range, the uncertainty interval shown with it (or none), what
#: 0 and the top of the range mean, and whether (and how) it counts in the ProbeScore; ``short``
#: is the header's text of a column that is not a component.
_LAT_LO, _LAT_HI = LATENCY_RANGE_MS
COLUMN_HELP: dict[str, dict[str, str]] = {
    "rank": {
        "label": "# (rank)",
        "what": "the entry's place on this board: ProbeScore without the license contribution first, "
        "license only breaks exact ties; deprecated entries are not ranked",
        "unit": "place (1 = top)",
        "range": "1 to the number of ranked entries",
        "interval": "under the rank, its 95% rank interval lo–hi (paired bootstrap over the test rows); rows "
        "shaded alike in a run are a tie group: the data cannot tell adjacent members apart",
        "zero": "the last place: the lowest ranked entry",
        "top": "1: highest ranked; “tied for first” when another entry's rank interval also includes 1",
        "score": "the ranking itself, not a component",
    },
    "score": {
        "label": "ProbeScore",
        "short": "ProbeScore",
        "what": "the weighted sum of the seven components under the chosen weights spec (weights in each "
        "column header)",
        "unit": "none (a weighted mean of values in [0, 1])",
        "range": "[0, 1]",
        "interval": "below it, its 95% paired-bootstrap interval when the board's intervals are current",
        "zero": "0: every component at its worst",
        "top": "1: every component at its best",
        "score": "is the score",
    },
    "measured": {
        "label": "Measured-only score",
        "short": "Measured",
        "what": "the ProbeScore over the measured components only (imputed ones left out, the weights "
        "renormalised over what is left); the full ProbeScore is shown below it",
        "unit": "none",
        "range": "[0, 1]",
        "interval": "none",
        "zero": "0: every measured component at its worst",
        "top": "1: every measured component at its best",
        "score": "the ranking of the measured-only view",
    },
    "auroc": {
        "label": COMPONENT_LABELS["auroc"],
        "what": "area under the ROC curve on each task's test split, averaged over the category's active "
        "tasks: the chance that a random positive row scores above a random negative one",
        "unit": "none (a probability)",
        "range": "[0, 1]; 0.5 is chance",
        "interval": "below the value, its 95% bootstrap interval (the mean of the per-task bounds when "
        "there are several tasks)",
        "zero": "0: every negative scores above every positive (a perfect probe with its sign flipped)",
        "top": "1: every positive scores above every negative",
        "score": "counts, with the weight in its header",
    },
    "auroc_ea": {
        "label": COMPONENT_LABELS["auroc_ea"],
        "what": "AUROC counting only pairs of rows in the same quintile of the eval-awareness reference "
        "probe's score, so a probe that only detects “this looks like a test” gains nothing",
        "unit": "none (a probability)",
        "range": "[0, 1]; 0.5 is chance",
        "interval": "none on the board (resampled in the rank intervals)",
        "zero": "0: inside every quintile, negatives score above positives",
        "top": "1: perfect separation inside every quintile",
        "score": "counts, with the weight in its header; n/a for eval-awareness probes (the raw AUROC "
        "is used); imputed (*) as a fraction of the raw AUROC when the base model has no reference probe",
    },
    "auroc_ds": {
        "label": COMPONENT_LABELS["auroc_ds"],
        "what": "AUROC on the tasks' distribution-shift splits (held-out items re-formatted), averaged "
        "over tasks",
        "unit": "none (a probability)",
        "range": "[0, 1]; 0.5 is chance",
        "interval": "none on the board (resampled in the rank intervals)",
        "zero": "0: inverted ranking on the shifted rows",
        "top": "1: perfect separation on the shifted rows",
        "score": "counts, with the weight in its header; imputed (*) as a fraction of the raw AUROC for a "
        "task without a distribution-shift split",
    },
    "calibration": {
        "label": COMPONENT_LABELS["calibration"],
        "what": f"1 − 2·ECE: ECE is the expected calibration error of the probe's probabilities on the "
        f"test rows ({ECE_BINS} equal-width bins; the mean gap between predicted probability and "
        f"observed positive rate, weighted by bin size), clamped to [{ECE_RANGE[0]:g}, {ECE_RANGE[1]:g}]; "
        f"the measured ECE is in the cell's tooltip",
        "unit": "none (ECE is in probability units)",
        "range": "[0, 1]",
        "interval": "none on the board (resampled in the rank intervals)",
        "zero": f"0: ECE ≥ {ECE_RANGE[1]:g}, the probabilities are off by half or more on average",
        "top": "1: ECE = 0, predicted probabilities match the observed rates",
        "score": "counts, with the weight in its header",
    },
    "rho_ce": {
        "label": COMPONENT_LABELS["rho_ce"],
        "what": "the probe's recipe re-fit on the other base models; per word of a test row, the change of "
        "the score when the word is removed; the mean Pearson correlation of those effects between the "
        f"probe's model and each other model, clamped to [{RHO_RANGE[0]:g}, {RHO_RANGE[1]:g}]",
        "unit": "none (a correlation)",
        "range": f"[{RHO_RANGE[0]:g}, {RHO_RANGE[1]:g}] after clamping (a raw ρ below 0 shows as 0)",
        "interval": "none",
        "zero": "0: the re-fit probes rely on unrelated (or opposite) words on other models",
        "top": "1: the same words move the score the same way on every model",
        "score": "counts, with the weight in its header; imputed (*) with the spec's default when the probe "
        "has no recipe to re-fit",
    },
    "latency": {
        "label": COMPONENT_LABELS["latency"],
        "what": f"the probe alone applied to one activation vector (batch 1) on the worker, median over at "
        f"least 100 repetitions, in ms (the measured ms is in the cell's tooltip), normalised as "
        f"1 − log10(ms)/{math.log10(_LAT_HI):g} with ms clamped to [{_LAT_LO:g}, {_LAT_HI:g}]; the base "
        f"model's forward pass is not part of it",
        "unit": "none (the raw number is in ms)",
        "range": "[0, 1]",
        "interval": "none",
        "zero": f"0: {_LAT_HI:g} ms or slower",
        "top": f"1: {_LAT_LO:g} ms or faster. A linear or small MLP probe takes far less than {_LAT_LO:g} ms, "
        "so today every such probe shows 1.000: the column then does not separate the entries, and its "
        "weight adds the same amount to every ProbeScore, so it changes no rank",
        "score": "counts, with the weight in its header",
    },
    "license": {
        "label": COMPONENT_LABELS["license"],
        "what": "the openness score L of the probe's license, from the license registry (methodology, "
        "License scores)",
        "unit": "none",
        "range": "[0, 1]",
        "interval": "none (a registry value, not a measurement)",
        "zero": "0: the least open accepted license",
        "top": "1: the most open licenses",
        "score": "in the ProbeScore with the weight in its header, but it never decides a rank on its own: "
        "it only breaks exact ties",
    },
    "goodhart": {
        "label": COMPONENT_LABELS["goodhart"],
        "what": "an adversary with white-box access inserts 16 vectors inside the content (after its first "
        "token, never where the probe reads or pools) and moves them, each within a ball of radius ε around a "
        "random token's embedding, to push the frozen probe's score below its 1%-FPR threshold; ε grows over a "
        "log grid from 0.01 to 0.5 token-embedding norms. The recall of the attacked test positives relative "
        "to their recall with the unoptimised vectors inserted, as a curve over ε: its normalised area, mean "
        "over 2 seeds and the tasks (the probe page shows each curve, ε50 and the soft-suffix attack beside "
        "it). Every probe kind is attacked: a contrast pair in both prompts, an encoder in its word embeddings",
        "unit": "none (an area under a ratio of recalls)",
        "range": "[0, 1]",
        "interval": "the range over seeds, on the probe page",
        "zero": "0: the smallest radius already hides every positive the probe caught",
        "top": "1: no radius of the grid took a positive away. Not measured (every task catches too few "
        "positives to grade, a failed or pending run): under v0.0.3 the lowest value measured in the "
        "probe's category, flagged (0 where none is); under v0.0.2 the default 0.5",
        "score": "counts from weights spec v0.0.2 with the weight in its header (weight 0 under v0.0.1); "
        "under v0.0.2 the measurement is whatever the protocol's robustness run measured",
    },
    "borda": {
        "label": "Borda rank",
        "short": "Borda",
        "what": "on each of the category's tasks, the share of the other entries this one beats on test "
        "AUROC (ties count ½); the mean of those shares over its tasks ranks the entries. One task where "
        "an entry is far ahead cannot carry it, and a task where every entry is at 0.99 separates nobody",
        "unit": "a rank (1 is best)",
        "range": "1 to the number of entries",
        "interval": "none",
        "zero": "—",
        "top": "1: beats the most entries on the most tasks; the full category board's rank, whatever "
        "the view filters",
        "score": "not part of the ProbeScore (a second order beside it)",
    },
    "delta": {
        "label": "Rank delta (holdout − test)",
        "short": "Δrank",
        "what": "in the latest completed quarterly re-evaluation, the entry's rank by holdout AUROC minus "
        "its rank by test AUROC, among the entries that cycle measured",
        "unit": "ranks",
        "range": "−(entries − 1) to entries − 1",
        "interval": "none",
        "zero": "0: its place held on fresh rows",
        "top": "negative: it climbed on fresh rows; positive: it fell behind others (it looked better on "
        "test than it is); — : not measured in that cycle",
        "score": "not part of the ProbeScore (shown beside it)",
    },
}


#: What every metric's own column says about the ProbeScore: it is shown beside it, never in it.
BESIDE_THE_SCORE = "not part of the ProbeScore (shown beside it)"

#: The fields of a column's explanation, in the order the tooltip and the methodology page give them.
HELP_FIELDS = ("label", "what", "unit", "range", "interval", "zero", "top", "score")


def metric_column_help(m: Metric) -> dict[str, str]:
    """A metric's own board column explained from its row of the metric table: its label and
    definition (the board shows the mean over tasks of a per-task metric), its range, and its
    column's unit, interval and ends."""
    column = m.column
    assert column is not None, m.name
    return {
        "label": m.label,
        "what": f"{m.definition}; on the board, the mean over tasks" if m.per_task else m.definition,
        "unit": column.unit,
        "range": m.range_text,
        "interval": column.interval,
        "zero": column.zero,
        "top": column.top,
        "score": BESIDE_THE_SCORE,
    }


def column_help(key: str) -> dict[str, str]:
    """Board column ``key`` explained: a metric's own column from the metric table, any other
    from :data:`COLUMN_HELP`."""
    found = metric_table.board_column(key)
    return metric_column_help(found) if found is not None else COLUMN_HELP[key]


def column_help_list() -> list[dict[str, str]]:
    """Every board column explained, in the board's order (the methodology page's column table):
    the rank and the scores, the components, the metrics' own columns, the other orders."""
    own = [m.column.key for m in metric_table.board_columns() if m.column]
    keys = [k for k in COLUMN_HELP if k not in ("borda", "delta")] + own + ["borda", "delta"]
    return [{"key": key, **column_help(key)} for key in keys]


def column_tooltip(key: str) -> str:
    """A board header's ``title``: what the column is, its unit, range, interval, what its ends
    mean, whether it counts in the ProbeScore and, for a metric (or a component computed from
    one), its definition version."""
    h = column_help(key)
    shown = metric_table.column_metric(key)
    version = f" Definition version {shown.version}." if shown is not None else ""
    return (
        f"{h['label']}: {h['what']}. Unit: {h['unit']}. Range: {h['range']}. Interval: {h['interval']}. "
        f"Bottom: {h['zero']}. Top: {h['top']}. In the ProbeScore: {h['score']}.{version}"
    )


def metric_help(m: Metric, *, task: bool = False) -> str:
    """A metric's help text in the read API: its label and definition, from the metric table (a
    board row holds the mean over tasks of a per-task metric; ``task``: one task's value)."""
    mean = "; mean over tasks" if m.per_task and not task else ""
    return f"{m.label}: {m.definition}{mean}; null where not measured (definition version {m.version})"


def metric_interval_help(m: Metric) -> str:
    """The read API's help text of the 95% interval stored beside a metric (``<name>_ci``)."""
    return f"the 95% interval [lo, hi] of {m.name}; null where none is stored"


#: Two values closer than this read the same on the board (it shows three decimals).
FLAT_TOLERANCE = 0.0005
#: The rule in words (the methodology page).
FLAT_RULE = (
    f"every entry with a value within {FLAT_TOLERANCE:g} of the others (the board shows three decimals), "
    "at least two entries"
)


def flat_column_note(
    key: str, *, value: float, n: int, weight: float | None, imputed: int = 0, pending: int = 0
) -> str:
    """What the board says about a column whose ``n`` entries all show ``value`` (``imputed`` of
    them imputed, not measured; ``pending`` entries of the board with the column's runs still
    queued or running). A column imputed for every entry was measured on none: it says pending
    while runs of it are open, not measured otherwise, never that the entries are equal."""
    if weight:
        effect = (
            f"it counts in the ProbeScore (weight {weight:.2f}), adding the same {weight * value:.3f} to every "
            "entry, so it changes no rank"
        )
    else:
        effect = "it is not part of the ProbeScore"
    if imputed == n and pending:
        return (
            f"pending: measured on none of the {n} entries yet ({pending} with its runs queued or running);"
            f" until then each shows the imputed {value:.3f}; {effect}"
        )
    if imputed == n:
        return f"not measured on any of the {n} entries: each shows the imputed {value:.3f}; {effect}"
    which = f"; {imputed} of them imputed" if imputed else ""
    more = f"; {pending} more pending" if pending and not imputed else ""
    return f"all {n} entries equal ({value:.3f}{which}{more}): this column does not separate them; {effect}"


def flat_column_short(*, n: int, imputed: int = 0, pending: int = 0, **_: object) -> str:
    """The word under a flat column's header: pending or not measured when no entry has it
    measured (:func:`flat_column_note`), else that its entries are all equal."""
    if imputed == n:
        return "pending" if pending else "not measured"
    return "all equal"


# --------------------------------------------------------------------------- the methodology in prose

#: The methodology in prose, in the repository: the methodology page renders it above the numbers
#: in force (weights, tolerances, policy numbers), which it takes from the registry and the code.
METHODOLOGY_PATH = Path(__file__).resolve().parent.parent / "docs" / "METHODOLOGY.md"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def markdown_html(text: str, *, drop_title: bool = False, id_prefix: str = "m-") -> str:
    """Markdown (CommonMark with tables) as HTML. Raw HTML in the text is escaped, never passed
    through (``html`` off), and markdown-it refuses unsafe link schemes (``javascript:``). Each
    heading gets the id ``<id_prefix><slug of its text>``; ``drop_title`` leaves out a leading
    level-1 heading (the page has its own)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    if drop_title and len(tokens) >= 3 and tokens[0].type == "heading_open" and tokens[0].tag == "h1":
        tokens = tokens[3:]
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            token.attrSet("id", id_prefix + _slug(tokens[i + 1].content))
    return md.renderer.render(tokens, md.options, {})


@lru_cache(maxsize=1)
def _methodology_html(path: Path, mtime_ns: int) -> str:
    return markdown_html(path.read_text(encoding="utf-8"), drop_title=True)


def methodology_html() -> SafeString:
    """docs/METHODOLOGY.md as HTML, safe to insert as it is: markdown-it escaped any raw HTML in
    it (rendered again when the file changes)."""
    return mark_safe(_methodology_html(METHODOLOGY_PATH, METHODOLOGY_PATH.stat().st_mtime_ns))  # noqa: S308


#: where a page wants its table of contents (:func:`contents_insert`)
CONTENTS_MARK = "<!--contents-->"
_HEADING = re.compile(r'<h([23])\b([^>]*)\bid="([^"]+)"([^>]*)>(.*?)</h\1>', re.S)
_TAG = re.compile(r"<[^>]+>")
#: the class of a heading whose section holds the h2 headings after it (the methodology's "numbers
#: in force"): the contents list those under it
CONTENTS_GROUP = "contents-group"


def contents_html(page: str) -> str:
    """A table of contents of ``page`` (rendered HTML): a list of links to every ``h2`` and
    ``h3`` with an id, in page order, each ``h3`` under the ``h2`` before it, and every ``h2``
    after a heading of class ``CONTENTS_GROUP`` under that heading. The heading texts are the
    page's own (already escaped), less any tags inside them."""
    items: list[tuple[str, str, list[tuple[str, str]]]] = []
    grouped = False
    for level, before, anchor, after, inner in _HEADING.findall(page):
        text = " ".join(_TAG.sub("", inner).split())
        group = CONTENTS_GROUP in f"{before} {after}"
        if level == "2" and (group or not grouped):
            items.append((anchor, text, []))
            grouped = grouped or group
        elif items and (level == "3") != grouped:
            items[-1][2].append((anchor, text))
    out = ['<ol class="toc">']
    for anchor, text, children in items:
        nested = "".join(f'<li><a href="#{a}">{t}</a></li>' for a, t in children)
        out.append(f'<li><a href="#{anchor}">{text}</a>{f"<ol>{nested}</ol>" if nested else ""}</li>')
    out.append("</ol>")
    return "".join(out)


def contents_insert(page: str) -> str:
    """``page`` with its table of contents (:func:`contents_html`) where it marks one
    (``CONTENTS_MARK``); a page without the mark is returned as it is."""
    if CONTENTS_MARK not in page:
        return page
    return page.replace(CONTENTS_MARK, contents_html(page), 1)


#: drafting history a registry description may carry in parentheses ("... a leftover of a later
#: draft"): it names drafts that were never published, so a reader cannot place it; the pages
#: leave it out (the registry file, hashed and published as it is, keeps it)
_DRAFT_HISTORY = re.compile(r"\s*\([^()]*\bdraft\)")


def spec_description_shown(description: str) -> str:
    """A weights spec's description as the pages show it: without drafting history in
    parentheses (``_DRAFT_HISTORY``)."""
    return _DRAFT_HISTORY.sub("", description)


def duration_text(seconds: float | None) -> str:
    """A duration in words for a person: "45 s", "12 min", "2 h 05 min"; "—" when unknown."""
    if seconds is None:
        return "—"
    seconds = max(0, math.ceil(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
