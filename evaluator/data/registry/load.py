"""The whole registry under a root directory (:class:`Registry`, ``load_registry``): the tasks,
licenses, models, weights specs and protocols, checked against each other; split files re-hashed on
request; the registered SAEs (``registry/saes.yaml``) read on first use (``Registry.saes``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from evaluator.data.registry.files import default_root, sha256_file
from evaluator.data.registry.licenses import LicenseSpec, load_licenses
from evaluator.data.registry.models import ModelSpec, load_models
from evaluator.data.registry.protocols import Protocol, load_protocols
from evaluator.data.registry.saes import SaeRegistry, load_saes
from evaluator.data.registry.tasks import Category, SplitSpec, TaskSpec, panel_bytes_pinned
from evaluator.data.registry.tasks_yaml import load_tasks
from evaluator.data.registry.weights import WeightsSpec, load_weights_specs
from evaluator.errors import RegistryError, SplitHashMismatch, UnknownNameError


@dataclass(frozen=True)
class Registry:
    root: Path
    categories: dict[str, Category]
    tasks: dict[str, TaskSpec]
    licenses: dict[str, LicenseSpec]
    models: dict[str, ModelSpec]
    specs: dict[str, WeightsSpec]
    protocols: dict[str, Protocol] = field(default_factory=dict)

    @cached_property
    def saes(self) -> SaeRegistry:
        """The registered SAEs and their corpora (``registry/saes.yaml``, checked against the
        models), read on first use; none where the root has no such file."""
        return load_saes(self.root, self.models, missing_ok=True)

    def task(self, task_id: str) -> TaskSpec:
        if task_id not in self.tasks:
            raise UnknownNameError("task", task_id, sorted(self.tasks))
        return self.tasks[task_id]

    def model(self, model_id: str) -> ModelSpec:
        if model_id not in self.models:
            raise UnknownNameError("base model", model_id, sorted(self.models))
        return self.models[model_id]

    def license(self, license_id: str) -> LicenseSpec:
        if license_id not in self.licenses:
            raise UnknownNameError("license", license_id, sorted(self.licenses))
        return self.licenses[license_id]

    def spec(self, version: str | None = None) -> WeightsSpec:
        version = version or self.latest_spec_version
        if version not in self.specs:
            raise UnknownNameError("weights spec", version, sorted(self.specs))
        return self.specs[version]

    def protocol(self, protocol_id: str | None = None) -> Protocol:
        """A protocol by id; by default the current one (the highest p<N>): the board's."""
        if not self.protocols:
            raise RegistryError(f"{self.root}: no measurement protocol (registry/protocols/*.yaml)")
        protocol_id = protocol_id or max(self.protocols, key=lambda p: int(p[1:]))
        if protocol_id not in self.protocols:
            raise UnknownNameError("measurement protocol", protocol_id, sorted(self.protocols))
        return self.protocols[protocol_id]

    @property
    def latest_spec_version(self) -> str:
        return max(self.specs, key=lambda v: tuple(int(x) for x in v[1:].split(".")))

    def active_tasks(self, category: str, *, model: str | None = None) -> list[TaskSpec]:
        """Active tasks of ``category``; with ``model``, only those probes on it are measured on."""
        return [
            t
            for t in self.tasks.values()
            if t.category == category and t.is_active and (model is None or t.measured_on(model))
        ]

    def split_path(self, task_id: str, split: str, *, model: str | None = None) -> Path:
        return self.root / self.task(task_id).splits_for(model)[split].path

    def verify_split(self, task_id: str, split: str, *, model: str | None = None) -> str:
        """Re-hash one split file against tasks.yaml; return the hash or raise SplitHashMismatch.
        ``model``: which base model's files, for an on-policy task."""
        splits = self.task(task_id).splits_for(model)
        if split not in splits:
            raise RegistryError(f"task {task_id} has no {split!r} split for base model {model}")
        return self._verify_file(task_id, splits[split])

    def _verify_file(self, task_id: str, spec: SplitSpec) -> str:
        path = self.root / spec.path
        if not path.is_file():
            raise RegistryError(f"task {task_id}: split file {spec.path} is missing")
        actual = sha256_file(path)
        if actual != spec.sha256:
            raise SplitHashMismatch(spec.path, spec.sha256, actual)
        return actual

    def verify_all_splits(self) -> dict[tuple[str, str], str]:
        """Re-hash every split file, the per-model files of on-policy tasks included (keyed
        ``(task, "<model>/<split>")``)."""
        out = {(t, s): self.verify_split(t, s) for t in self.tasks for s in self.tasks[t].splits}
        for task in self.tasks.values():
            if task.stress is not None:
                out[(task.id, "stress")] = self._verify_file(task.id, task.stress)
        for task in self.tasks.values():
            for model, splits in task.splits_by_model.items():
                for s in splits:
                    out[(task.id, f"{model}/{s}")] = self.verify_split(task.id, s, model=model)
        return out


def _check_on_policy_models(tasks: dict[str, TaskSpec], models: dict[str, ModelSpec], where: str) -> None:
    """Every model of an on-policy task is a known decoder (an encoder has no behaviour to label)."""
    for task in tasks.values():
        for model_id in task.splits_by_model:
            if model_id not in models:
                raise RegistryError(
                    f"{where}: task {task.id}: splits_by_model names {model_id!r}, not a base model"
                    f" of registry/models.yaml ({', '.join(models)})"
                )
            if models[model_id].encoder:
                raise RegistryError(
                    f"{where}: task {task.id}: {model_id} is an encoder; it generates nothing, so it"
                    " has no on-policy splits"
                )


def load_registry(root: str | Path | None = None, *, verify_hashes: bool = False) -> Registry:
    """Load everything under ``root``; with ``verify_hashes`` re-hash every split file too."""
    root = Path(root) if root else default_root()
    categories, tasks = load_tasks(root / "tasks.yaml")
    reg = Registry(
        root=root,
        categories=categories,
        tasks=tasks,
        licenses=load_licenses(root / "registry" / "licenses.yaml"),
        models=load_models(root / "registry" / "models.yaml"),
        specs=load_weights_specs(root / "registry" / "weights"),
        protocols=load_protocols(root / "registry" / "protocols"),
    )
    _check_on_policy_models(reg.tasks, reg.models, str(root / "tasks.yaml"))
    if verify_hashes:
        reg.verify_all_splits()
        for task in reg.tasks.values():
            for model, pinned in task.text_panel.items():
                panel_bytes_pinned(root, task.id, model or None, pinned)
    return reg
