"""Public pages. Views are thin: parse the request, call a selector, render a template.

Every public page is cacheable (``Cache-Control: public, max-age``) with an ETag, and works without
JavaScript: sorting, filters and the spec switch are plain links and GET forms.
"""

from __future__ import annotations

from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import render

from evaluator.errors import EvaluatorError
from evaluator.metrics import metric_table
from evaluator.metrics.records import AggregateRecord
from leaderboard.errors import QueryError
from leaderboard.http import public_cache
from leaderboard.inputs import CompareQueryInput, ProbeQueryInput, board_query, query_parse
from leaderboard.policy import SATURATED_AUROC
from leaderboard.presentation import (
    FLAT_RULE,
    POLICY,
    column_help_list,
    column_tooltip,
    contents_insert,
    flat_column_note,
    flat_column_short,
    methodology_html,
)
from leaderboard.selectors import cycles, registry
from leaderboard.selectors.board.columns import BoardColumns, board_column_list, board_columns
from leaderboard.selectors.board.get import board_get, board_overview, category_tabs
from leaderboard.selectors.board.query import BOARD_STATUSES, board_filter_choices
from leaderboard.selectors.board.rows import Board, board_details_attach
from leaderboard.selectors.bundles import bundle_file_path
from leaderboard.selectors.compare import CompareQueryError, compare_rows, probes_compare, uncertainty_method
from leaderboard.selectors.cycles import (
    leakage_public_list,
    reevaluation_detail,
    reevaluation_reveal,
    reference_update_get,
    reference_update_list,
)
from leaderboard.selectors.exports import examples_export_path, examples_exports_list
from leaderboard.selectors.probes import artifact_version_get, probe_detail
from leaderboard.selectors.progress import (
    board_pending_attach,
    failures_public,
    pending_by_category,
    pending_on_task,
)
from leaderboard.selectors.registry import base_model_detail, base_model_list, task_detail
from leaderboard.selectors.reliability import reliability_rows
from leaderboard.selectors.submissions import queue_shares, submission_queue
from leaderboard.services.bundles import board_public_key
from leaderboard.web import plots

BOARD_PAGE_SIZE = 50


def query_errors(**not_found: str | None):
    """A page's answer to a ``QueryError`` (a malformed or unknown query parameter, spec or probe):
    the 400 error page naming the parameter; a 404 for an error that is one (no such public probe)
    and for the parameters named in ``not_found`` (parameter → the 404's message, None: the
    error's own)."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            try:
                return view(request, *args, **kwargs)
            except QueryError as exc:
                if exc.status_code == 404 or exc.param in not_found:
                    raise Http404(not_found.get(exc.param) or exc.message) from None
                context = {"message": exc.message, "param": exc.param}
                return render(request, "leaderboard/error.html", context, status=400)

        return wrapped

    return decorate


def _with(params, **changes) -> str:
    """The current query string with ``changes`` applied (None removes a key)."""
    merged = {k: v for k, v in params.items() if v not in ("", None)}
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return "?" + urlencode(merged) if merged else "?"


def _sort_headers(board: Board, params, stats: BoardColumns) -> list[dict]:
    """The column headers (selectors.board.columns.board_column_list: the score, the scored
    components by weight, then what is shown but not scored): label, weight, link, aria-sort, the
    column's explanation (presentation.column_help, also on the methodology page) and, for a column
    whose entries all show the same value, a note saying so. On a saturated board (most entries at
    the AUROC ceiling) the scored components and the other columns are each ordered by how much
    they separate the entries, the scored ones still first."""
    q = board.query
    listed = board_column_list(board)
    if stats.saturated:
        listed = listed[:1] + stats.separating_first_scored_first(listed[1:])
    columns: list[dict[str, Any]] = [
        {
            "key": c.key,
            "label": c.label,
            "short": c.short,
            "weight": c.weight,
            "metric": c.metric,
            "sortable": c.metric is None or c.metric.column is None or c.metric.column.sortable,
        }
        for c in listed
    ]
    flat = stats.flat
    headers = []
    for col in columns:
        active = q.sort == col["key"]
        if not col["sortable"]:
            href, aria = "", "none"
        elif active:
            flip = "asc" if q.descending else "desc"
            href = _with(params, sort=col["key"], dir=flip, page=None)
            aria = "descending" if q.descending else "ascending"
        else:
            href = _with(params, sort=None if col["key"] == "score" else col["key"], dir=None, page=None)
            aria = "none"
        note = short = ""
        if col["key"] in flat:
            note = flat_column_note(col["key"], weight=col["weight"], **flat[col["key"]])
            short = flat_column_short(**flat[col["key"]])
        headers.append(
            col
            | {
                "href": href,
                "aria_sort": aria,
                "active": active,
                "help": column_tooltip(col["key"]),
                "flat": note,
                "flat_short": short,
            }
        )
    return headers


def _board_context(request, board: Board) -> dict:
    params = request.GET
    page = Paginator(board.rows, BOARD_PAGE_SIZE).get_page(params.get("page"))
    stats = board_columns(board)
    board_details_attach(page.object_list)
    board_pending_attach(page.object_list)
    return {
        "board": board,
        "page_obj": page,
        "rows": page.object_list,
        "headers": _sort_headers(board, params, stats),
        "saturated": stats.saturated,
        "saturated_auroc": SATURATED_AUROC,
        "rank_help": column_tooltip("rank"),
        "choices": board_filter_choices(),
        "statuses": BOARD_STATUSES,
        "prev_href": _with(params, page=page.previous_page_number()) if page.has_previous() else None,
        "next_href": _with(params, page=page.next_page_number()) if page.has_next() else None,
        "export_query": _with(params, page=None)[1:],
    }


# --------------------------------------------------------------------------- board


@public_cache
@query_errors()
def index(request):
    spec, specs, summaries = board_overview(spec=request.GET.get("spec") or None)
    return render(
        request,
        "leaderboard/index.html",
        {
            "spec": spec,
            "specs": specs,
            "summaries": summaries,
            "tabs": category_tabs(),
            "pending": pending_by_category(),
        },
    )


@public_cache
@query_errors(category=None)
def category(request, slug):
    board = board_get(query=board_query(request.GET, category=slug))
    context = _board_context(request, board) | {
        "tabs": category_tabs(),
        "current": slug,
        "pending": pending_by_category().get(slug),
        "examples_export": next(iter(examples_exports_list()), None),
        "missing_domains": registry.category_named_domains_missing(category=slug),
    }
    return render(request, "leaderboard/category.html", context)


# --------------------------------------------------------------------------- probe


def _history_points(history) -> list[dict]:
    """One point per quarter: the result of the newest version evaluated in that cycle."""
    # history is ordered by quarter, then version: the newest version's result is the last one
    by_quarter = {result.cycle.quarter: result for result in history}
    return [
        {
            "quarter": q,
            "holdout_auroc": r.holdout_auroc,
            "test_auroc": r.test_auroc,
            "reference_auroc": r.reference_auroc,
            "outcome": r.outcome,
        }
        for q, r in sorted(by_quarter.items())
    ]


def _steer_charts(measurements: AggregateRecord) -> dict:
    """Direction utility on the probe page: each intervention's effect against the random spread."""
    steer = measurements.steer.tasks if measurements.steer else {}
    if not any(r.get("judged") for r in steer.values()):
        return {"steer_addition": None, "steer_ablation": None}
    rows = {
        kind: [
            (task, r[kind]["effect"], r[kind].get("random_effects") or [])
            for task, r in sorted(steer.items())
            if r.get(kind)
        ]
        for kind in ("addition", "ablation")
    }
    return {
        "steer_addition": plots.steer_svg(
            rows["addition"],
            title="Addition: change of the readout",
            x_label="mean change of the readout towards the positive behaviour",
        ),
        "steer_ablation": plots.steer_svg(
            rows["ablation"],
            title="Ablation: drop of the readout's AUROC",
            x_label="AUROC before − AUROC after projecting the direction out",
        ),
    }


def _attack_chart(measurements: AggregateRecord):
    """The robustness section's plot of the soft-suffix attack: recall against the steps, per task."""
    robustness = measurements.robustness.tasks if measurements.robustness else {}
    curves = {t: r["curve"] for t, r in sorted(robustness.items()) if r.get("curve")}
    return plots.attack_svg(curves) if curves else None


def _graded_chart(measurements: AggregateRecord):
    """The robustness section's plot of the graded attack: relative recall against ε, per task and seed."""
    robustness = measurements.robustness.tasks if measurements.robustness else {}
    curves = {
        f"{task} · seed {c['seed']}": c["points"]
        for task, r in sorted(robustness.items())
        for c in r.get("curves") or []
        if c.get("points")
    }
    return plots.graded_svg(curves) if curves else None


@public_cache
@query_errors(version="no such version")
def probe(request, slug):
    params = query_parse(ProbeQueryInput, request.GET)
    detail = probe_detail(slug=slug, spec=params.get("spec"), version=params.get("version"))
    if detail is None:
        raise Http404("no public probe with this id")
    roc = {r.task: r.result["roc"] for r in detail.results if r.result.get("roc")}
    reliability = {r.task: r.result["reliability"] for r in detail.results if r.result.get("reliability")}
    history = _history_points(detail.history)
    measurements = AggregateRecord.from_stored(detail.score.measurements if detail.score else None)
    charts = {
        "roc": plots.roc_svg(roc) if roc else None,
        "reliability": plots.reliability_svg(reliability) if reliability else None,
        "history": plots.history_svg(history) if history else None,
        **_steer_charts(measurements),
        "attack": _attack_chart(measurements),
        "graded": _graded_chart(measurements),
    }
    return render(
        request,
        "leaderboard/probe.html",
        {"d": detail, "charts": charts, "components": detail.components, "policy": POLICY},
    )


@public_cache(max_age=86400, immutable=True, etag=False)
def artifact(request, slug, number):
    """The artifact of a public version, as bytes (never for unscored, failed or rejected ones)."""
    version = artifact_version_get(slug=slug, number=number)
    if version is None:
        raise Http404("no public version")
    root = settings.ARTIFACT_ROOT.resolve()
    path = (root / version.artifact_path).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise Http404("artifact file missing")
    response = FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"{slug}-v{number}.safetensors",
        content_type="application/octet-stream",
    )
    response["ETag"] = f'"{version.artifact_sha256}"'
    response["X-Artifact-SHA256"] = version.artifact_sha256
    return response


# --------------------------------------------------------------------------- registry pages


@public_cache
def task_list(request):
    return render(
        request,
        "leaderboard/task_list.html",
        {"tasks": registry.task_list(), "tabs": category_tabs()},
    )


@public_cache
def task(request, slug):
    detail = task_detail(slug=slug)
    if detail is None:
        raise Http404("no such task")
    return render(
        request,
        "leaderboard/task.html",
        {"d": detail, "saturated_auroc": SATURATED_AUROC, "pending": pending_on_task(task=slug)},
    )


@public_cache
def model_list(request):
    return render(request, "leaderboard/model_list.html", {"models": base_model_list()})


@public_cache
def model(request, slug):
    detail = base_model_detail(slug=slug)
    if detail is None:
        raise Http404("no such base model")
    return render(request, "leaderboard/model.html", {"d": detail, "board": detail.board})


@public_cache
def methodology(request):
    context = registry.methodology() | {
        # the prose (docs/METHODOLOGY.md; raw HTML in it is escaped), above the numbers in force
        "methodology_text": methodology_html(),
        "uncertainty": uncertainty_method(),
        "columns": column_help_list(),
        "flat_rule": FLAT_RULE,
        "metrics": metric_table.metrics(),
        "reliability": reliability_rows(),
    }
    response = render(request, "leaderboard/methodology.html", context)
    # its table of contents, from the headings the page was rendered with
    response.content = contents_insert(response.content.decode()).encode()
    return response


# --------------------------------------------------------------------------- compare


@public_cache
@query_errors()
def compare(request):
    """Two probes side by side: ``?a=SLUG&b=SLUG`` or, from a board, the two ticked rows ``?p=…&p=…``."""
    params = query_parse(CompareQueryInput, request.GET)
    a, b = params.get("a"), params.get("b")
    picked = [p for p in request.GET.getlist("p") if p]
    if not (a or b) and picked:
        if len(picked) != 2:
            raise CompareQueryError(f"tick exactly two probes to compare ({len(picked)} ticked)", param="p")
        a, b = picked
    c = probes_compare(a=a, b=b, spec=params.get("spec"))
    charts = [
        plots.roc_svg(
            {f"A · {c.a.probe.name}": t.a["roc"], f"B · {c.b.probe.name}": t.b["roc"]},
            title=f"ROC curves on {t.task} (test split)",
            description=f"ROC curves of {c.a.probe.name} (A) and {c.b.probe.name} (B) on the test split of"
            f" {t.task}, overlaid; the dashed diagonal is chance.",
        )
        for t in c.tasks
        if t.a and t.b and t.a.get("roc") and t.b.get("roc")
    ]
    sides = (c.a, c.b)
    overall = [
        {
            "row": row,
            "values": [((s.score.measurements or {}).get(row.key) if s.score else None) for s in sides],
        }
        for row in compare_rows()
    ]
    context = {
        "c": c,
        "sides": sides,
        "overall": overall,
        "charts": charts,
        "side_by_side": compare_rows(per_task=True),
    }
    return render(request, "leaderboard/compare.html", context)


# --------------------------------------------------------------------------- cycles, leakage, queue


@public_cache
def reevaluation_list(request):
    return render(
        request,
        "leaderboard/reevaluation_list.html",
        {
            "cycles": cycles.reevaluation_list(),
            "updates": reference_update_list(),
            "exports": examples_exports_list(),
        },
    )


@public_cache
def examples_export(request, quarter):
    """A quarter's per-example bulk export (selectors.exports), as a download."""
    try:
        path = examples_export_path(quarter)
    except EvaluatorError:
        raise Http404("no such quarter") from None
    if not path.is_file():
        raise Http404(f"no per-example export for {quarter}")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"probebench-examples-{quarter}.jsonl.gz",
        content_type="application/gzip",
    )


@public_cache(max_age=86400, immutable=True, etag=False)
def bundle_file(request, bundle_id):
    """A result bundle this board published (selectors.bundles), as a download; its name is its id."""
    path = bundle_file_path(bundle_id)
    if path is None:
        raise Http404("no published bundle with that id")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"probebench-{bundle_id[:16]}.tar",
        content_type="application/x-tar",
    )


def board_key(request):
    """The board's public signing key (PEM): what its bundles and receipts are verified with."""
    return HttpResponse(board_public_key(), content_type="application/x-pem-file")


@public_cache
def reference_update(request, pk):
    update = reference_update_get(pk=pk)
    if update is None:
        raise Http404("no such reference update")
    return render(request, "leaderboard/reference_update.html", {"update": update})


@public_cache
def reevaluation(request, quarter):
    found = reevaluation_detail(quarter=quarter)
    if found is None:
        raise Http404("no such cycle")
    cycle, results = found
    listed = [r for r in results if r.outcome in ("dropped", "deprecated")]
    # the seed and the holdouts' rows: only once the cycle has completed (None before)
    reveal = reevaluation_reveal(quarter=quarter)[1] if cycle.is_revealed else None
    return render(
        request,
        "leaderboard/reevaluation.html",
        {"cycle": cycle, "results": results, "listed": listed, "policy": POLICY, "reveal": reveal},
    )


@public_cache
def leakage(request):
    return render(request, "leaderboard/leakage.html", {"records": leakage_public_list()})


@public_cache
def queue(request):
    return render(
        request,
        "leaderboard/queue.html",
        {
            "entries": submission_queue(),
            "shares": queue_shares(),
            "failures": failures_public(),
            "goal_days": POLICY["review_goal_days"],
        },
    )
