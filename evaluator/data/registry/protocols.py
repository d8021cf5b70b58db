"""The measurement protocols (registry/protocols/<id>.yaml): compute, harvest, seeds, tolerances,
the steering and attack settings, read and validated."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.data.registry.files import default_root, read_yaml, require, sha256_file
from evaluator.errors import EvaluatorError, RegistryError

_PROTOCOL_ID = re.compile(r"^p[1-9][0-9]*$")
#: compute dtypes a protocol may name (bf16 is for exploration only: never a board number)
PROTOCOL_DTYPES: tuple[str, ...] = ("float32",)
PROTOCOL_DEVICES: tuple[str, ...] = ("cpu", "cuda")


@dataclass(frozen=True)
class ProtocolTolerances:
    """The tolerance contract of a protocol: what two environments of it may differ by."""

    score_atol: float  # per-example |Δs| ≤ score_atol + score_rtol · max|s|
    score_rtol: float
    auroc: float
    ece: float
    #: reproduction: Pearson and Spearman of the re-fit's test scores ≥ this, and |ΔAUROC| ≤ below
    repro_min_score_correlation: float
    repro_max_auroc_diff: float

    def score_bound(self, max_abs_score: float) -> float:
        """The per-example bound for a run whose largest |s(x)| is ``max_abs_score``."""
        return self.score_atol + self.score_rtol * float(max_abs_score)

    @property
    def reproduction_criterion(self) -> str:
        """The reproduction rule in words (shown on the probe page)."""
        c, d = self.repro_min_score_correlation, self.repro_max_auroc_diff
        return f"re-fit test scores: Pearson ≥ {c:g} and Spearman ≥ {c:g}, |ΔAUROC| ≤ {d:g}"


@dataclass(frozen=True)
class SteeringSettings:
    """A protocol's ``steering`` section: how direction utility is measured (evaluator.axes.steer)."""

    #: the strengths swept on train, as multiples of the median residual norm at the probe's layer
    strengths: tuple[float, ...]
    sweep_examples: int  # balanced train rows of the sweep
    #: the fluency guard: a strength whose steered perplexity on the fluency text exceeds this
    #: multiple of the unsteered one is not a steering strength (the push broke the model)
    max_perplexity_ratio: float
    fluency_task: str  # the task whose train texts are the fluency text (read as plain text)
    fluency_examples: int
    fluency_tokens: int  # each fluency text cut to this many tokens
    random_directions: int  # K seeded random unit directions per seed (≥ 64)
    random_seeds: tuple[int, ...]  # one pool of K per seed: the spread over seeds
    examples: int  # default size of the seeded, balanced subset of test rows
    seed: int  # the subsets
    #: a readout whose AUROC against the labels is below this is reported and never judged
    min_readout_auroc: float
    generation_examples: int  # rows per class of the generated-text readout
    generation_random: int  # random directions the generated-text readout is compared with
    #: the most work the test interventions may take, in 10^12 multiply-accumulates of the replayed
    #: blocks' weights (evaluator.axes.steer_readout.intervention_work): a task above it is not judged, so that
    #: no steer run can hold a worker for hours; a function of the artifact, data and protocol
    max_intervention_teramacs: float


@dataclass(frozen=True)
class AttackSettings:
    """A protocol's ``attack`` section: the adversary's budget against a frozen probe
    (evaluator.axes.attack): a universal soft suffix of ``suffix_tokens`` free input embeddings,
    ``steps`` Adam steps on batches of ``batch`` train positives at ``learning_rate`` × the RMS of
    the input-embedding table, seeded by ``seed``; recall measured on the test positives at
    ``checkpoints`` and every ``eval_every`` steps after the last of them."""

    suffix_tokens: int
    steps: int
    batch: int
    learning_rate: float
    seed: int
    checkpoints: tuple[int, ...]
    eval_every: int


@dataclass(frozen=True)
class GradedAttackSettings:
    """A protocol's ``attack_graded`` section: the graded adversary's budget
    (evaluator.axes.attack_graded). ``tokens`` vectors inserted inside the content, each held in an
    L2 ball of radius ε × the embedding norm for ε over ``radii`` (increasing); at each radius
    ``steps`` Adam steps on batches of ``batch`` train positives at ``step_fraction`` × the radius;
    one curve per seed of ``seeds``. The test positives attacked: a seeded subset of at most
    ``max_positives``; a task whose clean operating point catches fewer than ``min_caught`` of them
    is not attacked (a ratio of a handful of caught rows is noise). Where the task's next-token
    readout is validated on the model (the ``steering`` section's rule), a second curve keeps the
    behaviour: a positive counts as evaded only while its readout stays within ``readout_tolerance``
    nats of its clean value, and the optimiser pays ``readout_weight`` × the shortfall."""

    tokens: int
    radii: tuple[float, ...]
    steps: int
    batch: int
    step_fraction: float
    seeds: tuple[int, ...]
    max_positives: int = 64
    min_caught: int = 8
    readout_tolerance: float = 1.0
    readout_weight: float = 1.0

    def check(self) -> GradedAttackSettings:
        """The budget itself, or an EvaluatorError naming the value that is out of range."""
        if not 1 <= self.tokens <= 64:
            raise EvaluatorError(f"attack budget: tokens {self.tokens}: accepted 1..64")
        if not self.radii or any(not (0 < r <= 10) for r in self.radii):
            raise EvaluatorError(f"attack budget: radii {list(self.radii)}: accepted values in (0, 10]")
        if list(self.radii) != sorted(set(self.radii)):
            raise EvaluatorError(f"attack budget: radii {list(self.radii)}: must increase strictly")
        if not 0 <= self.steps <= 1000 or not 1 <= self.batch <= 256:
            raise EvaluatorError(
                f"attack budget: steps {self.steps} (accepted 0..1000), batch {self.batch} (accepted 1..256)"
            )
        if not 0 < self.step_fraction <= 1:
            raise EvaluatorError(f"attack budget: step_fraction {self.step_fraction}: accepted (0, 1]")
        if not self.seeds or any(not 0 <= s <= 2**31 - 1 for s in self.seeds):
            raise EvaluatorError(
                f"attack budget: seeds {list(self.seeds)}: accepted 0..{2**31 - 1}, at least one"
            )
        if not 0 < self.readout_tolerance <= 100 or not 0 <= self.readout_weight <= 100:
            raise EvaluatorError(
                f"attack budget: readout_tolerance {self.readout_tolerance} (accepted (0, 100]),"
                f" readout_weight {self.readout_weight} (accepted [0, 100])"
            )
        if not 1 <= self.max_positives <= 10_000 or not 1 <= self.min_caught <= self.max_positives:
            raise EvaluatorError(
                f"attack budget: max_positives {self.max_positives} (accepted 1..10000), min_caught"
                f" {self.min_caught} (accepted 1..max_positives)"
            )
        return self


@dataclass(frozen=True)
class Protocol:
    """A named, versioned measurement protocol (registry/protocols/<id>.yaml)."""

    id: str
    released: str
    description: str
    dtype: str  # compute dtype of everything scored, on every device
    devices: tuple[str, ...]
    tf32: bool  # False: TF32 off on CUDA
    float32_matmul_precision: str
    max_length: int
    truncation_side: str
    padding_side: str
    batch_size: int
    max_batch_tokens: int
    seeds: dict[str, int]
    tolerances: ProtocolTolerances
    sha256: str  # of the protocol file's bytes
    #: direction utility settings; None: the protocol does not measure it
    steering: SteeringSettings | None = None
    #: the adversary's budget; None: the protocol does not measure robustness to an attack
    attack: AttackSettings | None = None
    #: the graded adversary's budget; None: the Goodhart resistance is the suffix attack's (p1)
    attack_graded: GradedAttackSettings | None = None

    def summary(self) -> dict[str, Any]:
        """JSON-able facts recorded beside every number measured under the protocol."""
        return {
            "id": self.id,
            "sha256": self.sha256,
            "dtype": self.dtype,
            "tf32": self.tf32,
            "max_length": self.max_length,
            "tolerances": dataclasses.asdict(self.tolerances),
        }


def _number(value: Any, where: str, *, integer: bool = False, positive: bool = True) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
    if isinstance(value, bool) or not ok or (positive and value <= 0) or (not positive and value < 0):
        kind = "integer" if integer else "finite number"
        raise RegistryError(
            f"{where} must be a {'positive' if positive else 'non-negative'} {kind}, got {value!r}"
        )
    return value


def _steering_settings(st: Any, where: str) -> SteeringSettings:
    keys = (
        "strengths",
        "sweep_examples",
        "max_perplexity_ratio",
        "fluency_task",
        "fluency_examples",
        "fluency_tokens",
        "random_directions",
        "random_seeds",
        "examples",
        "seed",
        "min_readout_auroc",
        "generation_examples",
        "generation_random",
        "max_intervention_teramacs",
    )
    require(st, keys, f"{where}: steering")
    unknown = sorted(set(st) - set(keys))
    if unknown:
        raise RegistryError(f"{where}: steering: unknown key(s) {', '.join(unknown)}")
    strengths = st["strengths"]
    if not isinstance(strengths, list) or not strengths:
        raise RegistryError(f"{where}: steering.strengths must be a non-empty list of positive numbers")
    for i, m in enumerate(strengths):
        _number(m, f"{where}: steering.strengths[{i}]")
    seeds = st["random_seeds"]
    if not isinstance(seeds, list) or len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise RegistryError(f"{where}: steering.random_seeds must list at least 2 distinct seeds")
    for i, seed in enumerate(seeds):
        _number(seed, f"{where}: steering.random_seeds[{i}]", integer=True, positive=False)
    if _number(st["random_directions"], f"{where}: steering.random_directions", integer=True) < 64:
        raise RegistryError(f"{where}: steering.random_directions must be at least 64")
    if _number(st["max_perplexity_ratio"], f"{where}: steering.max_perplexity_ratio") <= 1:
        raise RegistryError(f"{where}: steering.max_perplexity_ratio must be above 1")
    if not 0.5 <= _number(st["min_readout_auroc"], f"{where}: steering.min_readout_auroc") <= 1:
        raise RegistryError(f"{where}: steering.min_readout_auroc must be in [0.5, 1]")
    if not isinstance(st["fluency_task"], str):
        raise RegistryError(f"{where}: steering.fluency_task must be a task id")
    for key in ("sweep_examples", "fluency_examples", "fluency_tokens", "examples", "generation_examples"):
        _number(st[key], f"{where}: steering.{key}", integer=True)
    _number(st["generation_random"], f"{where}: steering.generation_random", integer=True, positive=False)
    _number(st["seed"], f"{where}: steering.seed", integer=True, positive=False)
    _number(st["max_intervention_teramacs"], f"{where}: steering.max_intervention_teramacs")
    return SteeringSettings(
        strengths=tuple(float(m) for m in strengths),
        sweep_examples=int(st["sweep_examples"]),
        max_perplexity_ratio=float(st["max_perplexity_ratio"]),
        fluency_task=st["fluency_task"],
        fluency_examples=int(st["fluency_examples"]),
        fluency_tokens=int(st["fluency_tokens"]),
        random_directions=int(st["random_directions"]),
        random_seeds=tuple(int(x) for x in seeds),
        examples=int(st["examples"]),
        seed=int(st["seed"]),
        min_readout_auroc=float(st["min_readout_auroc"]),
        generation_examples=int(st["generation_examples"]),
        generation_random=int(st["generation_random"]),
        max_intervention_teramacs=float(st["max_intervention_teramacs"]),
    )


def load_protocol(path: Path) -> Protocol:
    """Read and validate one protocol file: every field present, a float32 compute dtype, TF32 off,
    left truncation and right padding (what the harvester does), positive tolerances."""
    data = read_yaml(path) or {}
    where = str(path)
    require(data, ("id", "compute", "harvest", "seeds", "tolerances"), where)
    pid = str(data["id"])
    if not _PROTOCOL_ID.match(pid) or path.stem != pid:
        raise RegistryError(f"{where}: id {pid!r} must look like p1 and match the file name")
    compute, harvest, tol = data["compute"], data["harvest"], data["tolerances"]
    require(compute, ("dtype", "devices", "tf32", "float32_matmul_precision"), f"{where}: compute")
    if compute["dtype"] not in PROTOCOL_DTYPES:
        raise RegistryError(
            f"{where}: compute.dtype {compute['dtype']!r} is not one of {', '.join(PROTOCOL_DTYPES)}"
            " (bfloat16 is for exploration, never a board number)"
        )
    devices = tuple(compute["devices"] or ())
    if not devices or not set(devices) <= set(PROTOCOL_DEVICES):
        raise RegistryError(f"{where}: compute.devices must be a subset of {', '.join(PROTOCOL_DEVICES)}")
    if compute["tf32"] is not False or compute["float32_matmul_precision"] != "highest":
        raise RegistryError(f"{where}: TF32 must be off (tf32: false, float32_matmul_precision: highest)")
    require(
        harvest,
        ("max_length", "truncation_side", "padding_side", "batch_size", "max_batch_tokens"),
        f"{where}: harvest",
    )
    if harvest["truncation_side"] != "left" or harvest["padding_side"] != "right":
        raise RegistryError(f"{where}: the harvester truncates on the left and pads on the right")
    for key in ("max_length", "batch_size", "max_batch_tokens"):
        _number(harvest[key], f"{where}: harvest.{key}", integer=True)
    seeds = data["seeds"] or {}
    for key in ("recipe", "baselines", "bootstrap", "transfer"):
        if key not in seeds:
            raise RegistryError(f"{where}: seeds.{key} is required")
        _number(seeds[key], f"{where}: seeds.{key}", integer=True, positive=False)
    require(tol, ("score_atol", "score_rtol", "auroc", "ece", "reproduction"), f"{where}: tolerances")
    repro = tol["reproduction"] or {}
    require(repro, ("min_score_correlation", "max_auroc_diff"), f"{where}: tolerances.reproduction")
    for key in ("score_atol", "score_rtol", "auroc", "ece"):
        _number(tol[key], f"{where}: tolerances.{key}")
    if not 0 < _number(repro["min_score_correlation"], f"{where}: reproduction.min_score_correlation") <= 1:
        raise RegistryError(f"{where}: tolerances.reproduction.min_score_correlation must be in (0, 1]")
    _number(repro["max_auroc_diff"], f"{where}: tolerances.reproduction.max_auroc_diff")
    released = data.get("released", "")
    if isinstance(released, dt.date):
        released = released.isoformat()
    steering = _steering_settings(data["steering"], where) if data.get("steering") is not None else None
    attack = _attack_settings(data.get("attack"), where) if data.get("attack") is not None else None
    graded = _graded_settings(data["attack_graded"], where) if data.get("attack_graded") is not None else None
    return Protocol(
        id=pid,
        released=str(released),
        description=str(data.get("description") or "").strip(),
        dtype=str(compute["dtype"]),
        devices=devices,
        tf32=False,
        float32_matmul_precision="highest",
        max_length=int(harvest["max_length"]),
        truncation_side="left",
        padding_side="right",
        batch_size=int(harvest["batch_size"]),
        max_batch_tokens=int(harvest["max_batch_tokens"]),
        seeds={k: int(v) for k, v in seeds.items()},
        tolerances=ProtocolTolerances(
            score_atol=float(tol["score_atol"]),
            score_rtol=float(tol["score_rtol"]),
            auroc=float(tol["auroc"]),
            ece=float(tol["ece"]),
            repro_min_score_correlation=float(repro["min_score_correlation"]),
            repro_max_auroc_diff=float(repro["max_auroc_diff"]),
        ),
        sha256=sha256_file(path),
        steering=steering,
        attack=attack,
        attack_graded=graded,
    )


def _attack_settings(at: Any, where: str) -> AttackSettings:
    """The ``attack`` section of a protocol file, checked."""
    keys = ("suffix_tokens", "steps", "batch", "learning_rate", "seed", "checkpoints", "eval_every")
    if not isinstance(at, dict):
        raise RegistryError(f"{where}: attack must be a mapping with {', '.join(keys)}")
    require(at, keys, f"{where}: attack")
    for key in ("suffix_tokens", "steps", "batch", "eval_every"):
        _number(at[key], f"{where}: attack.{key}", integer=True)
    _number(at["learning_rate"], f"{where}: attack.learning_rate")
    _number(at["seed"], f"{where}: attack.seed", integer=True, positive=False)
    points = at["checkpoints"]
    if (
        not isinstance(points, list)
        or not points
        or any(isinstance(c, bool) or not isinstance(c, int) for c in points)
        or points != sorted(set(points))
        or points[0] != 0
    ):
        raise RegistryError(f"{where}: attack.checkpoints must be increasing integers starting at 0")
    return AttackSettings(
        suffix_tokens=int(at["suffix_tokens"]),
        steps=int(at["steps"]),
        batch=int(at["batch"]),
        learning_rate=float(at["learning_rate"]),
        seed=int(at["seed"]),
        checkpoints=tuple(int(c) for c in points),
        eval_every=int(at["eval_every"]),
    )


def _graded_settings(at: Any, where: str) -> GradedAttackSettings:
    """The ``attack_graded`` section of a protocol file, checked."""
    keys = (
        "tokens",
        "radii",
        "steps",
        "batch",
        "step_fraction",
        "seeds",
        "max_positives",
        "min_caught",
        "readout_tolerance",
        "readout_weight",
    )
    if not isinstance(at, dict):
        raise RegistryError(f"{where}: attack_graded must be a mapping with {', '.join(keys)}")
    require(at, keys, f"{where}: attack_graded")
    unknown = sorted(set(at) - set(keys))
    if unknown:
        raise RegistryError(f"{where}: attack_graded: unknown key(s) {', '.join(unknown)}")
    for key in ("tokens", "steps", "batch", "max_positives", "min_caught"):
        _number(at[key], f"{where}: attack_graded.{key}", integer=True)
    _number(at["step_fraction"], f"{where}: attack_graded.step_fraction")
    _number(at["readout_tolerance"], f"{where}: attack_graded.readout_tolerance")
    _number(at["readout_weight"], f"{where}: attack_graded.readout_weight", positive=False)
    for key, integer in (("radii", False), ("seeds", True)):
        values = at[key]
        if not isinstance(values, list) or not values:
            raise RegistryError(f"{where}: attack_graded.{key} must be a non-empty list")
        for i, v in enumerate(values):
            _number(v, f"{where}: attack_graded.{key}[{i}]", integer=integer, positive=not integer)
    settings = GradedAttackSettings(
        tokens=int(at["tokens"]),
        radii=tuple(float(r) for r in at["radii"]),
        steps=int(at["steps"]),
        batch=int(at["batch"]),
        step_fraction=float(at["step_fraction"]),
        seeds=tuple(int(s) for s in at["seeds"]),
        max_positives=int(at["max_positives"]),
        min_caught=int(at["min_caught"]),
        readout_tolerance=float(at["readout_tolerance"]),
        readout_weight=float(at["readout_weight"]),
    )
    try:
        return settings.check()
    except EvaluatorError as exc:
        raise RegistryError(f"{where}: attack_graded: {exc}") from None


def load_protocols(directory: Path) -> dict[str, Protocol]:
    """Every protocol under ``directory``; a registry without the folder (a test's small registry)
    uses the project's own protocols: the protocol belongs to the code that measures."""
    if not directory.is_dir():
        directory = default_root() / "registry" / "protocols"
    protocols = {p.stem: load_protocol(p) for p in sorted(directory.glob("*.yaml"))}
    if not protocols:
        raise RegistryError(f"{directory}: no measurement protocol files (*.yaml)")
    return protocols
