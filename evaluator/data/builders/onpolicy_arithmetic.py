"""``onpolicy-addition-v1`` (reasoning): will the model add two numbers correctly?

Every row is the prompt "Q: What is <a> + <b>?\\nA: <a> + <b> =" for two-digit a and b; the label
is whether this base model's own greedy continuation (float32, 5 new tokens) starts with the right
sum. Both classes share the template and the numbers are drawn uniformly, so the wording carries
the label only through which sums the model gets right. The probe reads the question before the
answer is produced. distshift: the same template with a three-digit first operand (100–199) — a
harder item distribution the probe never saw.

No source package: the items are generated from a seeded random generator (``rng``); the labels are
the model's. Measured (``bench/onpolicy_survey.py``): SmolLM2-135M-Instruct sums 27 of 64 two-digit
pairs right (under "Q: What is <a> plus <b>?\\nA:" none: it repeats the question); Gemma 3 270M
sums 7 of 64 (it mostly continues the expression), too few for a balanced split, so only SmolLM2
is built.
"""

from __future__ import annotations

import re

from evaluator.data.builders.common import BuildContext, BuiltTask, Row, TaskMeta, rng
from evaluator.data.builders.onpolicy import balanced_splits

ADDITION_ID = "onpolicy-addition-v1"
MODELS: tuple[str, ...] = ("smollm2-135m-instruct",)
PROMPT = "Q: What is {a} + {b}?\nA: {a} + {b} ="
MAX_NEW_TOKENS = 5
N_MAIN = 1000
N_DISTSHIFT = 400
TEST_PER_CLASS = 100
HOLDOUT_PER_CLASS = 40
MIN_TRAIN_PER_CLASS = 40
GENERATION_SETTINGS: dict[str, object] = {
    "max_new_tokens": MAX_NEW_TOKENS,
    "prompt": PROMPT,
    "distshift_prompt": PROMPT + " (a in 100..199)",
}

_FIRST_INT = re.compile(r"-?\d+")


def sums_right(output: str, a: int, b: int) -> bool:
    """The judge: the first integer of the continuation is a + b."""
    m = _FIRST_INT.search(output)
    return m is not None and int(m.group()) == a + b


def problems() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(main, distshift) problems: distinct unordered two-digit pairs in a random order; distshift
    pairs a three-digit first operand with a two-digit second one."""
    r = rng(ADDITION_ID, "problems")
    pairs = [(a, b) for a in range(10, 100) for b in range(a, 100)]
    main = [(a, b) if r.random() < 0.5 else (b, a) for a, b in r.sample(pairs, N_MAIN)]
    shift_pairs = [(a, b) for a in range(100, 200) for b in range(10, 100)]
    return main, r.sample(shift_pairs, N_DISTSHIFT)


def build_addition(ctx: BuildContext) -> BuiltTask:
    main, shift = problems()
    items = [(f"q{a}p{b}", PROMPT.format(a=a, b=b)) for a, b in main] + [
        (f"ds{a}p{b}", PROMPT.format(a=a, b=b)) for a, b in shift
    ]
    prompts = dict(items)
    by_model: dict[str, dict[str, list[Row]]] = {}
    for model in MODELS:
        outputs = ctx.generations(ADDITION_ID, model, items, MAX_NEW_TOKENS)

        def rows(pairs, prefix: str, kind: str, outputs=outputs, model=model) -> list[Row]:
            out = []
            for a, b in pairs:
                key = f"{prefix}{a}p{b}"
                out.append(
                    Row(
                        key=key,
                        group=f"s{min(a, b)}p{max(a, b)}",
                        label=0 if sums_right(outputs[key], a, b) else 1,
                        text=prompts[key],
                        domain="mathematics",
                        meta={"a": a, "b": b, "model": model, "output": outputs[key], "prompt": kind},
                    )
                )
            return out

        by_model[model] = balanced_splits(
            ADDITION_ID,
            model,
            rows(main, "q", "main"),
            rows(shift, "ds", "distshift"),
            test_per_class=TEST_PER_CLASS,
            holdout_per_class=HOLDOUT_PER_CLASS,
            min_train_per_class=MIN_TRAIN_PER_CLASS,
        )
    return BuiltTask(meta=META, splits={}, splits_by_model=by_model)


def relabel(meta: dict, output: str) -> int:
    return 0 if sums_right(output, meta["a"], meta["b"]) else 1


META = TaskMeta(
    id=ADDITION_ID,
    category="reasoning",
    family="onpolicy-arithmetic",
    name="On-policy: will the model add two two-digit numbers correctly?",
    description=(
        "The prompt 'Q: What is <a> + <b>?\\nA: <a> + <b> =' for seeded two-digit a, b; the label is whether"
        " this base model's own greedy continuation (float32, 5 new tokens) starts with a + b. Both classes"
        " share the template: only the numbers differ. distshift: a three-digit first operand (100-199)."
    ),
    positive="the model's greedy answer is not the right sum",
    negative="the model's greedy answer is the right sum",
    source={
        "package": "(none: seeded integers)",
        "version": "-",
        "path": "evaluator/builders/onpolicy_arithmetic.py",
        "license": "CC0-1.0",
        "citation": (
            "Generated items (seeded); labels from the base model's own greedy answers (on-policy), after"
            " the 'will the model get it right' probing of Kadavath et al., 2022."
        ),
    },
    templates={"single": "{text}"},
    caveats=(
        "On-policy: labels are the base model's greedy answers judged by the first integer of the continuation."
        " The bag-of-words baseline sees the numbers as words and may learn which numbers are hard; see its"
        " AUROC on the card. Classes are balanced by subsampling the majority class."
    ),
)
