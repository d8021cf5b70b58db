"""A short human summary of ``python -m evaluator evaluate``'s result, for a terminal.

The CLI prints it instead of the JSON when stdout is a terminal and ``--json`` was not given
(scripts that pipe the output keep the JSON). Pure: reads the result dict, returns text.
"""

from __future__ import annotations

from typing import Any

from evaluator.data.registry.weights import COMPONENTS

#: the components' names in the summary (the board's short labels)
LABELS = {
    "auroc": "AUROC",
    "auroc_ea": "AUROC-EA",
    "auroc_ds": "AUROC-DS",
    "calibration": "Calibration",
    "rho_ce": "Transfer ρ",
    "latency": "Latency",
    "license": "License",
    "goodhart": "Goodhart",
}


def _n(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    return f"{value:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        first, *rest = cells
        return "  ".join(
            [first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))]
        )

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _task_row(task_id: str, metrics: dict) -> list[str]:
    ci = metrics.get("auroc_ci") or []
    status = metrics.get("auroc_ea_status")
    ea = _n(metrics.get("auroc_ea")) if status == "measured" else (status or "—")
    ds = _n(metrics.get("auroc_ds")) + ("*" if metrics.get("auroc_ds_imputed") else "")
    return [
        task_id,
        str(metrics.get("n_test", "—")),
        _n(metrics.get("auroc")),
        f"[{_n(ci[0], 2)}, {_n(ci[1], 2)}]" if len(ci) == 2 else "—",
        ea,
        ds,
        _n(metrics.get("ece")),
        _n(metrics.get("recall_at_1pct_fpr")),
    ]


def evaluation_summary(result: dict[str, Any]) -> str:
    """The per-task metrics, the ProbeScore's components and total, and the notes, as text."""
    probe = result.get("probe") or {}
    model = result.get("model") or {}
    score = result.get("probe_score") or {}
    head = (
        f"{probe.get('name', 'probe')} · {model.get('id', probe.get('base_model', '?'))}"
        f" · layer {probe.get('layer', '?')} · protocol {result.get('protocol') or 'none (exploration)'}"
        f" · weights spec {score.get('spec', '?')}"
    )
    out = [head, ""]
    tasks = result.get("tasks") or {}
    task_rows = [_task_row(task_id, (t or {}).get("metrics") or {}) for task_id, t in tasks.items()]
    out += _table(
        ["task", "n test", "AUROC", "95% CI", "AUROC-EA", "AUROC-DS", "ECE", "Recall@1%FPR"], task_rows
    )
    agg = result.get("aggregate") or {}
    latency = agg.get("latency_ms")
    out += [
        "",
        f"mean over {agg.get('n_tasks', len(tasks))} task(s): AUROC {_n(agg.get('auroc'))} · "
        f"ECE {_n(agg.get('ece'))} · Brier {_n(agg.get('brier'))} · "
        f"Recall@1%FPR {_n(agg.get('recall_at_1pct_fpr'))} · probe latency "
        + (f"{latency:.4g} ms" if isinstance(latency, (int, float)) else "—"),
        "",
    ]
    components = score.get("components") or {}
    rows = []
    for name in COMPONENTS:
        c = components.get(name)
        if not c:
            continue
        raw = c.get("raw")
        measured = (f"{raw:.4g} ms" if name == "latency" else _n(raw, 4)) if raw is not None else "imputed"
        rows.append(
            [
                LABELS.get(name, name) + ("*" if c.get("imputed") else ""),
                _n(c.get("value")),
                _n(c.get("weight"), 2),
                _n(c.get("contribution")),
                measured,
            ]
        )
    out += _table(["component (mean over tasks)", "value", "weight", "contribution", "measured"], rows)
    total = f"ProbeScore {_n(score.get('total'))}"
    if score.get("measured_total") is not None:
        total += f"  (measured components only: {_n(score.get('measured_total'))})"
    out += ["", total]
    extra = []
    if agg.get("lift_over_random") is not None:
        extra.append(f"AUROC lift over random directions {_n(agg['lift_over_random'])}")
    reproduction = result.get("reproduction")
    if isinstance(reproduction, dict):
        extra.append("recipe reproduced" if reproduction.get("reproduced") else "recipe NOT reproduced")
    if extra:
        out.append(" · ".join(extra))
    imputed = result.get("imputed") or {}
    for name, why in imputed.items():
        out.append(f"* {LABELS.get(name, name)} imputed: {why}")
    for note in result.get("notes") or []:
        out.append(f"note: {note}")
    out.append("Every number, per-task details and provenance: add --json (or pipe the output).")
    return "\n".join(out) + "\n"
