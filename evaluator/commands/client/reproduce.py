"""``reproduce``: re-run a public probe locally and judge the board's numbers against the local ones.

``reproduce`` downloads a public probe's artifact and metadata from the public API, checks the
artifact's SHA-256 against the one the API publishes, re-runs it locally through the ``evaluate``
command (same protocol, same tasks, same transfer targets, the server's eval-awareness reference
probe when it publishes one) and judges every number the board shows against the local one within
the protocol's tolerances: exit status 1 on any disagreement, naming the task and the metric. A
number only one side has (an axis still pending on the board, a metric the local run could not
measure) is reported as not compared, never as a disagreement. On a terminal it prints a table
(latency shown, never judged); ``--json``, or a stdout that is not a terminal, prints the JSON
report instead. For the token owner's probe that is not public yet it says how far its submission
has got.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from evaluator.commands import train_cli
from evaluator.commands.client.submit import submission_progress_line
from evaluator.commands.client.transport import (
    IDENT,
    MAX_ARTIFACT_BYTES,
    ClientError,
    api_error,
    get_json,
    http_request,
    ident,
    integer,
    is_json,
    printable,
    same_origin_url,
    server_answer,
    server_args,
    server_connect,
)
from evaluator.data.registry.load import load_registry
from evaluator.metrics import metric_table

#: tolerances when the protocol file has none (the metric table's defaults, per judged metric;
#: the AUROC's interval is judged like the AUROC)
DEFAULT_TOLERANCES = metric_table.tolerances_for(metric_table.DEFAULT_TOLERANCES)
DEFAULT_TOLERANCES["auroc_ci"] = DEFAULT_TOLERANCES["auroc"]


#: the verdict of a number only one side has: shown with its reason, never a disagreement
NOT_COMPARED = "not compared"

#: the board's axis a judged number comes from when it is not a score run's (the probe API's
#: ``pending_axes`` names the axes still being measured)
METRIC_AXES = {"rho_ce": "transfer", "reproduced": "reproduce"}


class Disagreement(dict):
    """A command result printed as JSON whose exit status is 1 (see evaluator.commands.cli.main)."""

    exit_code = 1


def reproduce_args(p: argparse.ArgumentParser) -> None:
    server_args(
        p,
        token="optional API token (default $PROBEBENCH_TOKEN): only used to say how far your own"
        " probe that is not public yet has got; downloads never carry it",
    )
    p.add_argument("--probe", required=True, help="probe id, optionally @vN for a version (default: latest)")
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument("--cache-dir", type=Path, default=None, help="model + activation cache")
    p.add_argument("--device", default=None, help="cpu, cuda, … (default: CUDA when available)")
    p.add_argument(
        "--reference-probe",
        type=Path,
        default=None,
        help="eval-awareness reference probe directory (default: the one the server publishes)",
    )
    p.add_argument("--keep", type=Path, default=None, help="keep the downloaded probe in this directory")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the JSON report only (the default when stdout is not a terminal; on a terminal"
        " the default is the table)",
    )


def probe_spec_parse(raw: str) -> tuple[str, int | None]:
    slug, _, version = raw.partition("@")
    number = None
    if version:
        digits = version[1:] if version[:1] in ("v", "V") else version
        if not digits.isdigit():
            raise ClientError(f"--probe {raw!r}: expected SLUG or SLUG@vN (e.g. my-probe@v2)")
        number = int(digits)
    if not slug or not IDENT.fullmatch(slug):
        raise ClientError(f"--probe {raw!r}: expected SLUG or SLUG@vN")
    return slug, number


def probe_metadata_from_api(detail: dict[str, Any]) -> dict[str, Any]:
    """probe.json of the public version, from the probe API's fields."""
    v = detail["version"]
    return {
        "name": detail["name"],
        "category": detail["category"],
        "base_model": detail["base_model"],
        "layer": v["layer"],
        "position": v["position"],
        "input": v["input"],
        "output": v["output"],
        "license": v["license"],
        "authors": v.get("authors") or [],
        "paper_url": v.get("paper_url") or "",
        "description": v.get("description") or "",
        "training_data": v.get("training_data") or {},
        "declared_metrics": v.get("declared_metrics") or {},
        "recipe": v.get("recipe"),
    }


def artifact_download(*, server: str, path: Any, expected_sha256: Any, what: str) -> bytes:
    """The artifact's bytes, checked against the SHA-256 the API publishes; only from the server's
    own origin over http(s)."""
    if not isinstance(expected_sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", expected_sha256):
        raise ClientError(f"{what}: malformed answer from {server}: no artifact SHA-256")
    url = same_origin_url(server, path, what=f"{what}'s artifact")
    resp = http_request("GET", url, max_bytes=MAX_ARTIFACT_BYTES)
    if resp.status != 200:
        raise api_error(resp, f"downloading {what}")
    actual = hashlib.sha256(resp.body).hexdigest()
    if actual != expected_sha256:
        raise ClientError(
            f"{what}: the downloaded artifact's SHA-256 {actual} is not the published {expected_sha256}"
        )
    header = resp.headers.get("X-Artifact-SHA256")
    if header and header != expected_sha256:
        raise ClientError(
            f"{what}: the server sent X-Artifact-SHA256 {header}, the API publishes {expected_sha256}"
        )
    return resp.body


def probe_not_public(*, server: str, slug: str, number: int | None, token: str | None) -> ClientError:
    """Why there is no public version: with the owner's token, how far its submission has got."""
    wanted = f"{slug}@v{number}" if number is not None else slug
    if not token:
        return ClientError(
            f"no public probe {wanted} on {server} (if it is yours and still being evaluated,"
            " pass --token to see how far it has got)"
        )
    query = urllib.parse.urlencode({"probe": slug, "limit": 50})
    url = f"{server}/api/v1/submissions?{query}"
    listing = get_json(url, what="your submissions", token=token)
    with server_answer("your submissions", url):
        subs = [s for s in listing["results"] if s["probe"] == slug]
        if number is not None:
            subs = [s for s in subs if s["version"] == number]
        if not subs:
            return ClientError(f"no public probe {wanted} on {server}, and no submission of it by you")
        sub = max(subs, key=lambda s: integer(s["id"], "submission id"))
        sid = integer(sub["id"], "submission id")
    detail = get_json(f"{server}/api/v1/submissions/{sid}", what=f"submission {sid}", token=token)
    if not isinstance(detail, dict):
        raise ClientError(f"submission {sid}: malformed answer from {server}")
    status = str(detail.get("status") or "unknown")
    version = f"{slug}@v{sub['version']}"
    if status in ("failed", "rejected"):
        reason = detail.get("failure_reason") or detail.get("rejection_reason") or "no reason given"
        return ClientError(f"{version} is not public: submission {sid} {status} ({reason})")
    if status == "scored":
        return ClientError(f"{version} is scored (submission {sid}) but not public on {server}")
    return ClientError(
        f"{version} is not public yet: submission {sid} is {submission_progress_line(detail)};"
        f" follow it with: python -m evaluator follow {sid} --server {server}"
    )


def probe_download(
    *, server: str, slug: str, number: int | None, dest: Path, token: str | None = None
) -> dict[str, Any]:
    """Download a public version into ``dest`` (probe.safetensors + probe.json); its API detail."""
    query = f"?version={number}" if number is not None else ""
    url = f"{server}/api/v1/probes/{urllib.parse.quote(slug, safe='')}{query}"
    resp = http_request("GET", url)
    if resp.status == 404 and is_json(resp):
        raise probe_not_public(server=server, slug=slug, number=number, token=token)
    if resp.status != 200:
        raise api_error(resp, f"probe {slug}")
    detail = resp.json_object(f"probe {slug}")
    with server_answer(f"probe {slug}", url):
        version = detail["version"]
        what = f"{slug} v{integer(version['number'], 'version number')}"
        metadata = probe_metadata_from_api(detail)
        artifact_url, sha256 = version["artifact_url"], version["artifact_sha256"]
    data = artifact_download(server=server, path=artifact_url, expected_sha256=sha256, what=what)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "probe.safetensors").write_bytes(data)
    (dest / "probe.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return detail


def protocol_tolerances(registry: Path | None, protocol: str | None) -> tuple[str | None, dict[str, float]]:
    """The protocol id and its tolerances (``registry/protocols/<id>.yaml``, keys ``tolerances`` or
    ``tolerance``), over the defaults; (None, defaults) when no protocol is named and there is no
    protocol file.

    A named protocol must be one of the registry's protocol files (the project's own when the
    registry has no ``registry/protocols/``): the id is looked up among the files, never made
    into a path, so a server cannot point the client at another file."""
    import yaml

    root = registry or Path(__file__).resolve().parents[3]
    folder = root / "registry" / "protocols"
    if protocol is not None:
        if not folder.is_dir():
            folder = Path(__file__).resolve().parents[3] / "registry" / "protocols"
        known = {path.stem: path for path in sorted(folder.glob("p*.yaml"))}
        if not isinstance(protocol, str) or protocol not in known:
            raise ClientError(
                f"the server names measurement protocol {protocol!r}, not one of your registry's"
                f" ({', '.join(known) or 'none'}): update your registry"
            )
        candidates = [known[protocol]]
    else:
        candidates = sorted(folder.glob("p*.yaml"))[-1:]
    tolerances = dict(DEFAULT_TOLERANCES)
    for path in candidates:
        data = yaml.safe_load(path.read_text()) or {}
        block = data.get("tolerances") or data.get("tolerance") or {}
        for key, value in block.items() if isinstance(block, dict) else ():
            name = str({"auroc_abs": "auroc", "ece_abs": "ece"}.get(key, key))
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tolerances[name] = float(value)
        named = set(block) if isinstance(block, dict) else set()
        # a metric the protocol does not name is judged by its family's tolerance (metric table)
        families = {m.name: m.tolerance for m in metric_table.metrics() if m.tolerance}
        for metric, family in [("auroc_ci", "auroc"), *families.items()]:
            if metric not in named:
                tolerances[metric] = tolerances[family]
        return str(data.get("id") or path.stem), tolerances
    return protocol, tolerances


def _tolerance(metric: str, tolerances: dict[str, float]) -> float:
    if metric in tolerances:
        return tolerances[metric]
    return tolerances["auroc"] if metric.startswith("auroc") else tolerances["ece"]


def _pending_on_board(detail: dict[str, Any]) -> dict[str, str]:
    """axis → its label ("transfer 1/2") for the axes the probe API says are still pending."""
    pending = detail.get("pending_axes")
    axes = pending if isinstance(pending, list) else []
    return {
        a["axis"]: printable(str(a.get("label") or f"{a['axis']} pending"))
        for a in axes
        if isinstance(a, dict) and isinstance(a.get("axis"), str)
    }


def _absent_reason(metric: str, *, board: Any, pending: dict[str, str]) -> str:
    """Why a number only one side has is not compared."""
    if board is not None:
        return "not measured locally"
    axis = METRIC_AXES.get(metric)
    if axis is not None and axis in pending:
        return f"pending on the board ({pending[axis]})"
    return "not on the board"


def _judge(
    task: str,
    metric: str,
    board: Any,
    local: Any,
    tolerances: dict[str, float],
    pending: dict[str, str] | None = None,
) -> dict[str, Any]:
    tol = _tolerance(metric, tolerances)
    row = {"task": task, "metric": metric, "board": board, "local": local, "tolerance": tol}
    if board is None and local is None and METRIC_AXES.get(metric) not in (pending or {}):
        return row | {"diff": None, "verdict": "n/a"}
    if board is None or local is None:
        reason = _absent_reason(metric, board=board, pending=pending or {})
        return row | {"diff": None, "verdict": NOT_COMPARED, "reason": reason}
    if isinstance(board, bool) or isinstance(local, bool):
        return row | {"diff": None, "verdict": "agree" if board == local else "disagree"}
    if not all(isinstance(x, (int, float)) for x in (board, local)):
        return row | {"diff": None, "verdict": "disagree"}
    diff = abs(float(board) - float(local))
    ok = math.isfinite(diff) and diff <= tol + 1e-12
    return row | {"diff": diff, "verdict": "agree" if ok else "disagree"}


def _task_metrics() -> tuple[str, ...]:
    """What is judged per task (board ``tasks[]`` vs local ``tasks[t].metrics``): the metric
    table's per-task metrics, the AUROC's interval after the AUROC."""
    names = metric_table.judged_task_names()
    return names[:1] + ("auroc_ci",) + names[1:]


def numbers_compare(
    detail: dict[str, Any], local: dict[str, Any], tolerances: dict[str, float]
) -> list[dict]:
    """Every number the board shows for the version next to the local run's, with a verdict: agree,
    disagree, n/a (on neither side) or not compared (on one side only, with the reason)."""
    rows = []
    pending = _pending_on_board(detail)
    local_tasks = local.get("tasks") or {}
    for task in detail.get("tasks") or []:
        tid = task["task"]
        mine = (local_tasks.get(tid) or {}).get("metrics") or {}
        for metric in _task_metrics():
            board_v, local_v = task.get(metric), mine.get(metric)
            if metric == "auroc_ci":
                board_ci, local_ci = board_v or [None, None], local_v or [None, None]
                rows.append(_judge(tid, "auroc_ci_lo", board_ci[0], local_ci[0], tolerances, pending))
                rows.append(_judge(tid, "auroc_ci_hi", board_ci[1], local_ci[1], tolerances, pending))
            else:
                rows.append(_judge(tid, metric, board_v, local_v, tolerances, pending))
    measured = ((detail.get("score") or {}).get("measurements")) or {}
    aggregate = local.get("aggregate") or {}
    for metric in metric_table.judged_aggregate_names():
        if metric in measured:
            board_v, local_v = measured.get(metric), aggregate.get(metric)
            rows.append(_judge("aggregate", metric, board_v, local_v, tolerances, pending))
    board_repro = detail["version"].get("reproduced")
    local_repro = (local.get("reproduction") or {}).get("reproduced") if local.get("reproduction") else None
    if board_repro is not None or local_repro is not None or "reproduce" in pending:
        rows.append(_judge("aggregate", "reproduced", board_repro, local_repro, tolerances, pending))
    return rows


def splits_check(*, server: str, registry: Path | None, category: str, tasks: list[str]) -> None:
    """The local registry's split files of ``tasks`` are the server's (same SHA-256), else a local
    run would measure other rows and every difference would look like a wrong board number."""

    reg = load_registry(registry)
    url = f"{server}/api/v1/tasks?{urllib.parse.urlencode({'category': category})}"
    listing = get_json(url, what="the task list")
    with server_answer("the task list", url):
        _splits_match(reg, {t["slug"]: t for t in listing}, tasks)


def _splits_match(reg: Any, published: dict[str, Any], tasks: list[str]) -> None:
    for task_id in tasks:
        if task_id not in reg.tasks:
            raise ClientError(f"task {task_id} of the board is not in your registry ({reg.root}): update it")
        task = reg.task(task_id)
        for split in (published.get(task_id) or {}).get("splits") or []:
            # an on-policy task pins one set of files per base model
            mine = (
                task.splits_for(split.get("base_model")).get(split["name"])
                if task.on_policy or not split.get("base_model")
                else None
            )
            if mine is not None and mine.sha256 != split["sha256"]:
                raise ClientError(
                    f"task {task_id}: your {split['name']} split (SHA-256 {mine.sha256[:12]}…) is not the"
                    f" server's ({split['sha256'][:12]}…): use the registry the server measures with"
                )


def _evaluate_parser() -> argparse.ArgumentParser:
    """The ``evaluate`` command's parser, as ``python -m evaluator evaluate`` builds it."""
    parser = argparse.ArgumentParser(prog="python -m evaluator evaluate")
    train_cli.evaluate_args(parser)
    parser.set_defaults(command="evaluate", verbose=False)
    return parser


def _evaluate_locally(argv: list[str]) -> dict[str, Any]:
    """Run the ``evaluate`` command (the one the CLI runs, with its defaults) on ``argv``."""
    args = _evaluate_parser().parse_args(argv)
    result = train_cli.run_evaluate(args)
    assert isinstance(result, dict)  # the evaluate command returns its result as a dict
    return result


def _evaluate_option_names() -> set[str]:
    return {opt for action in _evaluate_parser()._actions for opt in action.option_strings}  # noqa: SLF001


def _cell(value: Any, metric: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.4g} ms" if metric == "latency_ms" else f"{value:.4f}"


def _verdict_text(row: dict[str, Any]) -> str:
    return f"{NOT_COMPARED}: {row['reason']}" if row.get("reason") else str(row["verdict"])


def comparison_table(result: dict[str, Any]) -> str:
    """The comparison as text: one line per number (the latency last, shown and never judged),
    then the verdict."""
    lines = [f"{'task':<28} {'metric':<20} {'board':>10} {'local':>10}  verdict"]
    for r in result["comparisons"]:
        lines.append(
            f"{r['task'][:28]:<28} {r['metric']:<20} {_cell(r['board']):>10} {_cell(r['local']):>10}"
            f"  {_verdict_text(r)}"
        )
    latency = result.get("latency_ms") or {}
    lines.append(
        f"{'aggregate':<28} {'latency_ms':<20} {_cell(latency.get('board'), 'latency_ms'):>10}"
        f" {_cell(latency.get('local'), 'latency_ms'):>10}  not judged (depends on the machine)"
    )
    judged = [r for r in result["comparisons"] if r["verdict"] in ("agree", "disagree")]
    skipped = len(result.get("not_compared") or [])
    tail = f"{len(judged)} numbers compared" + (f", {skipped} not compared" if skipped else "")
    head = f"{result['probe']}@v{result['version']} on {result['server']}"
    if result["verdict"] == "agree":
        lines.append(f"verdict: agree: {head} ({tail}, all within the protocol's tolerances)")
    else:
        lines.append(f"verdict: disagree: {head} ({tail}, {len(result['disagreements'])} outside)")
    return "\n".join(printable(line) for line in lines) + "\n"


def reproduce_summary(result: object) -> str:
    """The command's text on a terminal (``--json`` prints the JSON report instead)."""
    assert isinstance(result, dict)  # run_reproduce returns its report as a dict
    return comparison_table(result)


def _reference_download(*, server: str, ref_info: Any, dest: Path, token: str | None) -> dict[str, Any]:
    """The eval-awareness reference probe the board used, downloaded and checked like the probe."""
    slug = ident(ref_info["probe"], "reference probe id")
    number = ref_info.get("version")
    number = None if number is None else integer(number, "reference probe version")
    ref_detail = probe_download(server=server, slug=slug, number=number, dest=dest, token=token)
    with server_answer(f"probe {slug}", server):
        sha = ref_detail["version"]["artifact_sha256"]
        published = ref_info.get("artifact_sha256")
        if published and published != sha:
            raise ClientError(
                f"the server names reference probe {slug} with SHA-256 {published},"
                f" its probe page publishes {sha}"
            )
        return {"probe": slug, "version": ref_detail["version"]["number"], "artifact_sha256": sha}


def _evaluate_argv(
    args: argparse.Namespace, *, detail: dict[str, Any], probe_dir: Path, protocol: str | None
) -> tuple[list[str], list[str]]:
    """The ``evaluate`` arguments that measure as the board did, and the board's task ids; every
    id the server gives is checked to be an id before it becomes an argument."""
    options = _evaluate_option_names()
    argv = ["--probe", str(probe_dir), f"--spec={ident(detail['spec'], 'weights spec')}"]
    tasks = [ident(t["task"], "task id") for t in detail.get("tasks") or []]
    if tasks:
        argv.append("--tasks=" + ",".join(tasks))
    if args.registry:
        argv += ["--registry", str(args.registry)]
    if args.cache_dir:
        argv += ["--cache-dir", str(args.cache_dir)]
    if args.device:
        argv += ["--device", args.device]
    if "--protocol" in options and protocol:
        argv.append(f"--protocol={protocol}")
    # otherwise evaluate's defaults are the workers' defaults (no dtype given on either side)
    targets = [ident(t["model"], "transfer model") for t in detail.get("transfer") or []]
    # while the board's transfer runs are pending it shows no ρ_CE: nothing to compare a local
    # re-fit on every target with, so none is made (a ρ_CE it does show is always checked)
    measured = (detail.get("score") or {}).get("measurements") or {}
    if "transfer" in _pending_on_board(detail) and measured.get("rho_ce") is None:
        targets = []
    argv += ["--transfer-targets=" + ",".join(targets)] if targets else ["--no-transfer"]
    if detail["version"].get("reproduced") is None:
        argv += ["--no-reproduce"]
    if "--latency-reps" in options:
        argv += ["--latency-reps", "20"]  # latency is the machine's, shown but never judged
    return argv, tasks


def run_reproduce(args: argparse.Namespace) -> dict:
    server = server_connect(args, token_required=False)
    slug, number = probe_spec_parse(args.probe)
    url = f"{server}/api/v1/probes/{slug}"
    with tempfile.TemporaryDirectory(prefix="probebench-reproduce-") as tmp:
        work = args.keep or Path(tmp)
        probe_dir = work / "probe"
        detail = probe_download(server=server, slug=slug, number=number, dest=probe_dir, token=args.token)
        with server_answer(f"probe {slug}", url):
            version = detail["version"]
            score = detail.get("score") or {}
            measured = score.get("measurements") or {}
            protocol, tolerances = protocol_tolerances(
                args.registry, score.get("protocol") or measured.get("protocol")
            )
            argv, tasks = _evaluate_argv(args, detail=detail, probe_dir=probe_dir, protocol=protocol)
            category = ident(detail["category"], "category")
            ref_info = detail.get("ea_reference")
        splits_check(server=server, registry=args.registry, category=category, tasks=tasks)
        reference = args.reference_probe
        if reference is None and ref_info:
            reference = work / "reference"
            ref_info = _reference_download(server=server, ref_info=ref_info, dest=reference, token=args.token)
        if reference is not None:
            argv += ["--reference-probe", str(reference)]
        elif "ea_reference" in detail and "--no-reference-probe" in _evaluate_option_names():
            argv += ["--no-reference-probe"]  # the board had none: its auroc_ea is imputed
        local = _evaluate_locally(argv)

    with server_answer(f"probe {slug}", url):
        rows = numbers_compare(detail, local, tolerances)
        result = {
            "server": server,
            "probe": slug,
            "version": version["number"],
            "artifact_sha256": version["artifact_sha256"],
            "artifact_verified": True,
            "spec": detail["spec"],
            "protocol": protocol,
            "tolerances": tolerances,
            "ea_reference": ref_info if args.reference_probe is None else str(args.reference_probe),
            "comparisons": rows,
            "board_total": score.get("total"),
            "local_total": (local.get("probe_score") or {}).get("total"),
            "latency_ms": {
                "board": measured.get("latency_ms"),
                "local": (local.get("aggregate") or {}).get("latency_ms"),
            },
        }
    bad = [r for r in rows if r["verdict"] == "disagree"]
    result["verdict"] = "agree" if not bad else "disagree"
    result["disagreements"] = [
        f"{r['metric']} on {r['task']}: board {r['board']}, local {r['local']} (tolerance {r['tolerance']})"
        for r in bad
    ]
    result["not_compared"] = [
        f"{r['metric']} on {r['task']}: {r['reason']}" for r in rows if r["verdict"] == NOT_COMPARED
    ]
    if not getattr(args, "json", False) and not sys.stdout.isatty():
        # the JSON report goes to stdout (a file, a pipe): the table to the terminal beside it
        sys.stderr.write(comparison_table(result))
    if bad:
        first = bad[0]
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        message = (
            f"error: the board and the local run disagree: {first['metric']} on {first['task']}"
            f" (board {first['board']}, local {first['local']}, tolerance {first['tolerance']}){more}"
        )
        print(printable(message), file=sys.stderr)
        return Disagreement(result)
    return result
