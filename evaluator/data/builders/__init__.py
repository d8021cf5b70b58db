"""Deterministic builders of the task split files under ``registry/splits/``.

Each task has one builder function that reads pinned package archives (``sources.py``) and returns
its rows per split; ``common.write_task`` writes them byte-reproducibly. ``python -m evaluator
build-data`` runs them and pins the hashes in tasks.yaml; ``build-data --check`` proves the
committed files are exactly what the builders produce. ``pools.py`` builds the quarterly holdouts'
sealed pools from the same archives (never committed). Pure Python: no Django, no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from evaluator.data.builders.common import BuildContext, BuiltTask, TaskMeta
from evaluator.errors import UnknownNameError

#: task id -> (module, builder function, metadata attribute), in tasks.yaml order.
_BUILDERS: dict[str, tuple[str, str, str]] = {
    "halueval-qa-v1": ("halueval", "build_halueval_qa", "META"),
    "cities-truth-v1": ("geography", "build_cities_truth", "TRUTH_META"),
    "gsm8k-cot-consistency-v1": ("gsm8k", "build_gsm8k", "META"),
    "city-pairs-reasoning-v1": ("geography", "build_city_pairs", "PAIRS_META"),
    "records-deception-v1": ("geography", "build_records_deception", "DECEPTION_META"),
    "prompted-sandbagging-v1": ("sandbagging", "build_sandbagging", "META"),
    "benchmark-vs-user-v1": ("eval_awareness", "build_eval_awareness", "META"),
    "humaneval-hacks-v1": ("humaneval_hacks", "build_humaneval_hacks", "META"),
    "persuasion-techniques-v1": ("persuasion", "build_persuasion", "META"),
    "harmful-requests-v1": ("refusal", "build_refusal", "META"),
    "onpolicy-city-country-v1": ("onpolicy", "build_city_country", "CITY_COUNTRY_META"),
    "onpolicy-incentive-deception-v1": ("onpolicy_pressure", "build_incentive_deception", "DECEPTION_META"),
    "onpolicy-suggestion-sycophancy-v1": (
        "onpolicy_pressure",
        "build_suggestion_sycophancy",
        "SYCOPHANCY_META",
    ),
    "onpolicy-addition-v1": ("onpolicy_arithmetic", "build_addition", "META"),
    "onpolicy-refusal-v1": ("onpolicy_refusal", "build_onpolicy_refusal", "META"),
    "onpolicy-refusal-v2": ("onpolicy_refusal", "build_onpolicy_refusal_v2", "META_V2"),
}

TASK_IDS: tuple[str, ...] = tuple(_BUILDERS)
#: tasks labelled by each base model's own greedy outputs (splits per model, evaluator.data.builders.onpolicy)
ON_POLICY_TASK_IDS: tuple[str, ...] = (
    "onpolicy-city-country-v1",
    "onpolicy-incentive-deception-v1",
    "onpolicy-suggestion-sycophancy-v1",
    "onpolicy-addition-v1",
    "onpolicy-refusal-v1",
    "onpolicy-refusal-v2",
)


def builder(task_id: str) -> tuple[Callable[[BuildContext], BuiltTask], TaskMeta]:
    """The builder function and metadata of ``task_id`` (imports its module on demand)."""

    if task_id not in _BUILDERS:
        raise UnknownNameError("buildable task", task_id, list(_BUILDERS))
    module_name, fn_name, meta_name = _BUILDERS[task_id]
    module = importlib.import_module(f"evaluator.data.builders.{module_name}")
    return getattr(module, fn_name), getattr(module, meta_name)
