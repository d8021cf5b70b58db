"""The ``train`` and ``evaluate`` commands of ``python -m evaluator`` (registered on import).

    python -m evaluator train --task TASK_ID --model MODEL_ID --layer N --method METHOD --out DIR
    python -m evaluator evaluate --probe DIR [--tasks ID,…]

JSON on stdout; progress on stderr: a bar on a terminal, one line per split harvested otherwise
(``ProgressBar``). Defaults: registry = the project root, cache directory
= ``$PROBEBENCH_DATA_DIR/cache``, else ``./var/cache``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from evaluator.axes.evaluate import evaluate_probe
from evaluator.commands.base import default_cache_dir
from evaluator.commands.reference_probes.manifest import ea_reference_probe_dir
from evaluator.core.activations import ActivationCache, split_activations
from evaluator.core.applicability import INPUTS, POSITIONS
from evaluator.core.harvest import HarvestConfig
from evaluator.core.probes import load_probe, save_probe
from evaluator.core.recipes import METHODS, Recipe, train_recipe
from evaluator.data.registry.load import load_registry
from evaluator.errors import EvaluatorError
from evaluator.metrics.metrics import auroc
from evaluator.metrics.summary import evaluation_summary

# GNU OpenMP threads spin while they wait. On a small shared machine (2 cores, another process
# busy) that made a batch-1 forward ~10x slower; passive waiting costs little when the machine
# is idle. Set before torch is imported (this module is imported when the CLI starts).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


#: the step name a split's activations end with (evaluator.core.activations): a split harvested
#: or read from the cache
HARVEST_STEP = "harvest"


def _unknown_size_defaults(stream) -> dict[str, int]:
    """tqdm's ``ncols``/``nrows`` where the terminal reports a size of 0 (a pseudo-terminal no one
    sized, e.g. under ``script`` or some containers): tqdm would draw nothing there."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return {"ncols": 80, "nrows": 24}
    return {k: v for k, v, known in (("ncols", 80, size.columns), ("nrows", 24, size.lines)) if not known}


class ProgressBar:
    """A ``progress(fraction, step)`` callback on stderr, never stdout (the JSON result's).

    On a terminal, a tqdm bar whose description is the current step ("cities-v1/train harvest").
    Anywhere else (a log file, a pipe, CI), one line per split harvested or read from the cache,
    written when the split is done: ``evaluate [ 12%] cities-v1/train: harvested in 41 s``.
    """

    def __init__(self, desc: str, stream=None):
        self.desc = desc
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.bar = None
        if isatty is not None and isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                total=1000,
                desc=desc,
                file=self.stream,
                leave=False,
                **_unknown_size_defaults(self.stream),
                bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
            )
        self.done = 0
        self.step = ""  # the current step, its first call's time, its calls and its last fraction
        self.step_start = time.monotonic()
        self.step_calls = 0
        self.fraction = 0.0

    def __call__(self, fraction: float, step: str) -> None:
        fraction = min(max(fraction, 0.0), 1.0)
        if self.bar is None:
            if step != self.step:
                self._split_done()
                self.step, self.step_start, self.step_calls = step, time.monotonic(), 0
            self.step_calls += 1
            self.fraction = fraction
            return
        target = int(round(1000 * fraction))
        self.bar.set_description_str(step[:48], refresh=False)
        if target > self.done:
            self.bar.update(target - self.done)
            self.done = target
        else:  # waiting (a polled submission): keep the elapsed time moving
            self.bar.refresh()

    def _split_done(self) -> None:
        """The line of a split whose activations are ready (off a terminal)."""
        if not (self.step == HARVEST_STEP or self.step.endswith(" " + HARVEST_STEP)):
            return
        where = self.step.removesuffix(HARVEST_STEP).strip()
        # a cache read reports its end only; a harvest reports its start and each batch too
        how = (
            "read from the cache"
            if self.step_calls == 1
            else (f"harvested in {time.monotonic() - self.step_start:.0f} s")
        )
        head = f"{self.desc} [{100 * self.fraction:3.0f}%]"
        print(f"{head} {where}: {how}" if where else f"{head}: {how}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self._split_done()
            self.step = ""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", type=Path, default=None, help="project root holding tasks.yaml")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="model + activation cache (default $PROBEBENCH_DATA_DIR/cache or ./var/cache)",
    )
    p.add_argument(
        "--device",
        default=None,
        help="cpu or cuda (float32 with TF32 off on both: the protocol's); default: CUDA when available",
    )
    p.add_argument(
        "--dtype",
        default=None,
        choices=["auto", "float32", "bfloat16"],
        help="compute dtype (default: the measurement protocol's float32, the board's numbers);"
        ' bfloat16/auto are for exploration only: the output then says "protocol": null',
    )
    p.add_argument("--max-length", type=int, default=None, help="tokens kept per prompt (default 512)")


def _harvest_config(args: argparse.Namespace, registry=None):
    """The protocol's harvest settings (``--max-length`` overrides them: exploration)."""

    base = HarvestConfig.from_protocol(registry.protocol()) if registry is not None else HarvestConfig()
    return dataclasses.replace(base, max_length=args.max_length) if args.max_length else base


# --------------------------------------------------------------------------- train


def train_args(p: argparse.ArgumentParser) -> None:

    p.add_argument("--task", required=True, help="task id whose train split the probe learns from")
    p.add_argument("--model", required=True, help="base model id (registry/models.yaml)")
    p.add_argument("--layer", required=True, type=int, help="0 = embeddings, L = residual after block L")
    p.add_argument("--method", required=True, choices=METHODS)
    p.add_argument("--out", required=True, type=Path, help="directory for probe.safetensors + probe.json")
    p.add_argument("--position", default="last_token", choices=list(POSITIONS))
    p.add_argument("--input", default="single", choices=list(INPUTS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hyperparameters", default="{}", help="JSON object, e.g. '{\"C\": 0.1}'")
    p.add_argument("--name", default=None, help="probe name (default: derived from the recipe)")
    p.add_argument(
        "--license", default="Apache-2.0", help="license id of the artifact (registry/licenses.yaml)"
    )
    _common(p)


def run_train(args: argparse.Namespace) -> dict:
    # imported when called: tests replace evaluator.core.models.load_model (no model may load)
    from evaluator.core.models import load_model

    try:
        hyper = json.loads(args.hyperparameters)
    except json.JSONDecodeError as exc:
        raise EvaluatorError(f"--hyperparameters is not valid JSON: {exc}") from None
    reg = load_registry(args.registry)
    task = reg.task(args.task)
    reg.license(args.license)
    recipe = Recipe.from_dict(
        {
            "method": args.method,
            "task": args.task,
            "layer": args.layer,
            "position": args.position,
            "input": args.input,
            "hyperparameters": hyper,
            "seed": args.seed,
        },
        registry=reg,
    )
    cache_dir = args.cache_dir or default_cache_dir()
    config = _harvest_config(args)
    bar = ProgressBar(f"train {args.method}")
    try:
        lm = load_model(args.model, registry=reg, cache_dir=cache_dir, device=args.device, dtype=args.dtype)
        trained = train_recipe(
            recipe,
            lm,
            registry=reg,
            cache=ActivationCache(cache_dir),
            config=config,
            progress=lambda f, s: bar(0.8 * f, f"{args.task}/train {s}"),
        )
        name = args.name or f"{args.task} {args.method} probe ({args.model} L{args.layer} {args.position})"
        metadata = trained.metadata(
            name=name,
            category=task.category,
            license=args.license,
            description=f"Trained by `python -m evaluator train` from {args.task}/train.",
        )
        save_probe(args.out, trained.tensors, metadata, artifact_metadata=trained.artifact_metadata)
        probe = load_probe(args.out, registry=reg)  # validates what was written
        test = split_activations(
            lm,
            reg,
            args.task,
            "test",
            layers=[args.layer],
            position=args.position,
            input_kind=args.input,
            cache=ActivationCache(cache_dir),
            config=config,
            progress=lambda f, s: bar(0.8 + 0.2 * f, f"{args.task}/test {s}"),
        )[args.layer]
    finally:
        bar.close()
    return {
        "out": str(args.out),
        "artifact_sha256": probe.sha256,
        "metadata": metadata,
        "train": {
            "n": len(trained.train.ids),
            "auroc": auroc(probe.score(trained.train.X), trained.train.labels),
            "cache_key": trained.train.cache_key,
            "cache_hit": trained.train.cache_hit,
            "split_sha256": trained.train.split_sha256,
        },
        "test": {"n": len(test.ids), "auroc": auroc(probe.score(test.X), test.labels)},
        "fit": trained.info,
        "model": lm.describe(),
        "seconds": trained.seconds,
    }


# --------------------------------------------------------------------------- evaluate


def evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--probe", required=True, type=Path, help="directory with probe.safetensors + probe.json")
    p.add_argument(
        "--tasks", default=None, help="comma-separated task ids (default: the category's active tasks)"
    )
    p.add_argument(
        "--reference-probe",
        type=Path,
        default=None,
        help="eval-awareness reference probe for the same base model (default: the registry's,"
        " registry/reference_probes/ea-<model>, as on the board)",
    )
    p.add_argument(
        "--no-reference-probe", action="store_true", help="no reference probe: auroc_ea imputed, flagged"
    )
    p.add_argument(
        "--protocol",
        default=None,
        help="measurement protocol id to enforce (default: the registry's current one, e.g. p1;"
        " with --dtype bfloat16 the run is exploration, not a board number)",
    )
    p.add_argument("--spec", default=None, help="weights spec version (default: the latest)")
    p.add_argument(
        "--transfer-targets",
        default=None,
        help="comma-separated base model ids for rho_ce (default: every other model not loaded only on request)",
    )
    p.add_argument("--no-transfer", action="store_true", help="skip rho_ce (then imputed, flagged)")
    p.add_argument("--no-reproduce", action="store_true", help="skip the recipe reproduction check")
    p.add_argument("--latency-reps", type=int, default=200)
    p.add_argument("--examples", action="store_true", help="include per-example scores in the output")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the full JSON result (the default when stdout is not a terminal; on a terminal"
        " the default is a short summary table)",
    )
    _common(p)


def evaluate_summary(result: object) -> str:

    assert isinstance(result, dict)  # run_evaluate returns the result as a dict
    return evaluation_summary(result)


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def run_evaluate(args: argparse.Namespace) -> dict:
    """The board's numbers by default: the current protocol, the registry's eval-awareness
    reference probe for the probe's base model, the latest weights spec, the category's active
    tasks, cross-model transfer to every other base model."""

    reg = load_registry(args.registry)
    reference = args.reference_probe
    if reference is None and not args.no_reference_probe:
        reference = ea_reference_probe_dir(reg, load_probe(args.probe, registry=reg).base_model)
    bar = ProgressBar("evaluate")
    try:
        result = evaluate_probe(
            args.probe,
            registry=reg,
            cache_dir=args.cache_dir or default_cache_dir(),
            tasks=_csv(args.tasks),
            reference_probe=reference,
            spec_version=args.spec,
            transfer_targets=_csv(args.transfer_targets),
            compute_transfer=not args.no_transfer,
            compute_reproduction=not args.no_reproduce,
            latency_reps=args.latency_reps,
            device=args.device,
            dtype=args.dtype,
            harvest_config=_harvest_config(args, reg),
            progress=bar,
            protocol=args.protocol,
        )
    finally:
        bar.close()
    out = result.to_dict(include_examples=args.examples)
    out["reference_probe"] = str(reference) if reference is not None else None
    if result.protocol is None:
        out["notes"].append(
            "exploration: not measured under the protocol (dtype or harvest settings differ);"
            " these numbers are not comparable with the board's"
        )
    return out
