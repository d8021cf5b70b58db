"""The on-policy tasks' judges and generation settings, by task id (what ``build-data`` needs to
write tasks.yaml and to re-judge regenerated outputs). One module above the builders
(``onpolicy``, ``onpolicy_pressure``, ``onpolicy_arithmetic``, ``onpolicy_refusal``), so none of them imports another's
dispatch."""

from __future__ import annotations

from evaluator.data.builders import onpolicy_arithmetic, onpolicy_pressure, onpolicy_refusal
from evaluator.data.builders.onpolicy import CITY_COUNTRY_ID, GENERATION_SETTINGS, names_country


def generation_settings(task_id: str) -> dict[str, object]:
    """What tasks.yaml records of an on-policy task's generation (beside greedy, float32, batch size)."""
    if task_id in GENERATION_SETTINGS:
        return GENERATION_SETTINGS[task_id]
    if task_id == onpolicy_arithmetic.ADDITION_ID:
        return onpolicy_arithmetic.GENERATION_SETTINGS
    if task_id in onpolicy_pressure.FRAMES:
        return onpolicy_pressure.generation_settings(task_id)
    if task_id == onpolicy_refusal.REFUSAL_ID:
        return onpolicy_refusal.GENERATION_SETTINGS
    if task_id == onpolicy_refusal.REFUSAL_V2_ID:
        return onpolicy_refusal.GENERATION_SETTINGS_V2
    raise ValueError(f"{task_id} is not an on-policy task")


def generation_keys(task_id: str, row: dict) -> dict[str, str]:
    """role -> generation key of the outputs a committed row's label was judged from."""
    meta = row["meta"]
    if "generation_keys" in meta:
        return dict(meta["generation_keys"])
    return {"output": row["id"].removeprefix(f"{task_id}-")}


def relabel(task_id: str, meta: dict, outputs: dict[str, str]) -> int | None:
    """The label a committed row gets from (regenerated) greedy ``outputs`` (generation key ->
    output, :func:`generation_keys`): the task's judge. None: the row would leave the task."""
    if task_id in onpolicy_pressure.FRAMES:
        return onpolicy_pressure.relabel(task_id, meta, outputs)
    (output,) = outputs.values()
    if task_id == CITY_COUNTRY_ID:
        return 0 if names_country(output, meta["country"]) else 1
    if task_id == onpolicy_arithmetic.ADDITION_ID:
        return onpolicy_arithmetic.relabel(meta, output)
    if task_id in onpolicy_refusal.JUDGE:
        return onpolicy_refusal.relabel(output, task_id)
    raise ValueError(f"{task_id} is not an on-policy task")
