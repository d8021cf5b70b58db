"""Which tasks a probe can read, decided before any run is planned.

A probe reads one kind of input (``single`` or ``contrast_pair``) at one position and layer of one
base model. A task can be read by it only when the task has the template that input needs, the
base model has split files for it (an on-policy task records each model's own behaviour; a model
without them, such as the encoder, has nothing to be measured on) and the layer exists on that
model. :func:`applicability` says so, with the reason when not, for the planner of the board
(``leaderboard.services.runs``), its coverage backfill and quarterly cycles, the probe page's
"not applicable" list, and ``python -m evaluator evaluate``: one rule for all of them.

Pure: no model, no file read; it agrees with what the harvester refuses at the start of a run
(``evaluator.core.harvest.run_inputs_check``, tested on every reference probe against the whole
registry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

#: The probe vocabulary, one home (the artifact reader, the harvester, the submission check and
#: the submit form import it): where a probe reads the residual stream, what it reads, what its
#: raw output is. ``mean`` and ``max`` pool over the same tokens (:data:`POOLED_POSITIONS`).
POSITIONS: tuple[str, ...] = ("last_token", "mean", "max")
#: the positions that pool over a prompt's content tokens (every non-padding token but the special
#: tokens the tokenizer adds itself) rather than read one token
POOLED_POSITIONS: tuple[str, ...] = ("mean", "max")
INPUTS: tuple[str, ...] = ("single", "contrast_pair")
OUTPUTS: tuple[str, ...] = ("logit", "probability")
#: input kind → the task template it is rendered with
TEMPLATE_FOR_INPUT: dict[str, str] = {kind: kind for kind in INPUTS}


class TaskLike(Protocol):
    """A task as the rule reads it: ``evaluator.data.registry.tasks.TaskSpec``, or the board's Task row."""

    @property
    def templates(self) -> Mapping[str, Any]: ...

    def measured_on(self, model_id: str, /) -> bool: ...


class ModelLike(Protocol):
    """A base model as the rule reads it: ``evaluator.data.registry.models.ModelSpec`` or :class:`ModelReads`."""

    @property
    def id(self) -> str: ...

    @property
    def n_layers(self) -> int: ...


class ProbeMetadataLike(Protocol):
    """A probe's metadata as the rule reads it: ``evaluator.core.probes.ProbeMetadata``."""

    @property
    def input(self) -> str: ...

    @property
    def position(self) -> str: ...

    @property
    def layer(self) -> int | None: ...


T = TypeVar("T", bound=TaskLike)


@dataclass(frozen=True)
class ModelReads:
    """A base model's id and depth (the board builds it from its BaseModel row)."""

    id: str
    n_layers: int


@dataclass(frozen=True)
class ProbeReads:
    """What a probe reads: its input kind, position and layer (None: the layer is chosen on the
    model, as a recipe re-fit on another base model does)."""

    input: str
    position: str
    layer: int | None = None

    @classmethod
    def of(cls, metadata: ProbeMetadataLike) -> ProbeReads:
        return cls(input=metadata.input, position=metadata.position, layer=metadata.layer)


def applicability(probe: ProbeReads, task: TaskLike, model: ModelLike) -> tuple[bool, str]:
    """(True, "") when ``probe`` on ``model`` can be measured on ``task``; else (False, why) in
    one sentence for the probe page."""
    template = TEMPLATE_FOR_INPUT.get(probe.input)
    if template is None:
        return False, f"unknown input {probe.input!r}; accepted: {', '.join(TEMPLATE_FOR_INPUT)}"
    if probe.position not in POSITIONS:
        return False, f"unknown position {probe.position!r}; accepted: {', '.join(POSITIONS)}"
    if not task.templates.get(template):
        has = ", ".join(k for k in TEMPLATE_FOR_INPUT if task.templates.get(k))
        return False, (
            f"the task has no {template} template (it has: {has}), so a {probe.input} probe cannot read it"
        )
    if not task.measured_on(model.id):
        return False, (
            f"on-policy task: its labels are what each base model does, and {model.id}"
            " has no recorded behaviour on it (no split files for this model)"
        )
    if probe.layer is not None and not 0 <= probe.layer <= model.n_layers:
        return False, f"layer {probe.layer} is out of range for {model.id}: 0..{model.n_layers}"
    return True, ""


def applicable_tasks(
    probe: ProbeReads, tasks: Sequence[T], model: ModelLike, *, key=lambda task: task.id
) -> tuple[list[T], dict[str, str]]:
    """Split ``tasks`` into those ``probe`` can read and {``key(task)``: reason} for the others."""
    ok: list[T] = []
    not_applicable: dict[str, str] = {}
    for task in tasks:
        can, why = applicability(probe, task, model)
        if can:
            ok.append(task)
        else:
            not_applicable[key(task)] = why
    return ok, not_applicable
