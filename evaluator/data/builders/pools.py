"""The quarterly holdouts' sealed pools: rows built from a task's upstream source the way its
builder builds its public rows, out of upstream items that no public split of the task holds.

A pool is never committed: the board builds it from the pinned source archives
(``registry/sources.yaml``) and keeps it sealed under its data directory
(``evaluator.data.pools``). It is a pure function of those archives and the committed split files,
so anyone can rebuild it and check the SHA-256 a cycle published (``python -m evaluator
verify-holdout``). Which upstream items each pool takes:

- the HaluEval-question tasks (``benchmark-vs-user-v1``, ``prompted-sandbagging-v1``, the benign
  half of ``persuasion-techniques-v1``): slices of ``halueval.question_order`` after every public
  slice (``SEALED_QUESTION_SLICES``), rendered as the task's holdout rows are (the test and holdout
  frames and prompts);
- ``persuasion-techniques-v1``'s harmful half: the AdvBench behaviours no public split uses;
- the GeoNames tasks: the cities nearest in population rank to the task's own block (one block's
  width on each side of it, ``CITY_BLOCKS``), with false countries drawn afresh; these cities are
  used by the other geography tasks' public splits, in other templates and with labels about
  something else, and are less well known than the task's own block where they rank below it;
- ``halueval-qa-v1``, ``gsm8k-cot-consistency-v1``, ``humaneval-hacks-v1``,
  ``harmful-requests-v1``: the items their builders leave unused (length-matched HaluEval items,
  GSM8K problems, HumanEval problems, length-matched requests). The upstream is all but spent by
  the public splits, so these pools are tiny or empty; a cycle then draws from the public pool
  instead, and says so (``evaluator.data.pools``).

Every row of a group whose id, group or normalised text (``evaluator.data.texts.text_hash``)
appears in any public split of the task is dropped, then every group that repeats an earlier
group's text; what is left, sorted by id, is the pool. Bump ``POOL_VERSION`` when what a builder
below yields changes (a sealed pool cached under the old version is then rebuilt).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from evaluator.data.builders import eval_awareness, geography, gsm8k, halueval, humaneval_hacks, refusal
from evaluator.data.builders import persuasion as persuasion_builder
from evaluator.data.builders import sandbagging as sandbagging_builder
from evaluator.data.builders.common import BuildContext, Row, stable_shuffle, tag
from evaluator.data.texts import text_hash

POOL_VERSION = "1"
#: the HaluEval questions of the sealed pools: after the last public slice (halueval.POOL_SLICES)
SEALED_QUESTION_SLICES: dict[str, tuple[int, int]] = {
    "eval-awareness": (2800, 3800),
    "sandbagging": (3800, 4800),
    "persuasion": (4800, 5300),
}
PURPOSE = "sealed:"

PoolBuilder = Callable[[BuildContext, set[str]], list[Row]]


def _sealed_questions(ctx: BuildContext, consumer: str) -> list[halueval.QAItem]:
    start, stop = SEALED_QUESTION_SLICES[consumer]
    return halueval.question_order(ctx)[start:stop]


def _halueval_qa(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    fresh = [it for it in halueval.matched_items(ctx) if f"q{it.index:05d}" not in public_groups]
    return tag(halueval.qa_rows(fresh, with_context=False), "general_knowledge", halueval.HOTPOTQA_SOURCE)


def _eval_awareness(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    items = _sealed_questions(ctx, "eval-awareness")
    rows = eval_awareness.item_rows(items, "holdout_pool", eval_awareness.distractors_for(items))
    return tag(rows, "general_knowledge", halueval.HOTPOTQA_SOURCE)


def _sandbagging(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    rows = sandbagging_builder.item_rows(_sealed_questions(ctx, "sandbagging"), "holdout_pool")
    return tag(rows, "general_knowledge", halueval.HOTPOTQA_SOURCE)


def _persuasion(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    """Half unused AdvBench behaviours, half fresh questions, as many of each."""
    harmful = [h for h in persuasion_builder.harmful_requests(ctx) if h[0] not in public_groups]
    benign = [(f"q{it.index:05d}", it.question, "benign") for it in _sealed_questions(ctx, "persuasion")]
    return persuasion_builder.request_rows(harmful + benign[: len(harmful)], "holdout_pool")


def _city_window(ctx: BuildContext, task_id: str) -> list[geography.City]:
    """The cities one block's width on either side of the task's own block, in population rank."""
    start, stop = geography.CITY_BLOCKS[task_id]
    width = stop - start
    cities = geography.ranked_cities(ctx)
    return cities[max(0, start - width) : start] + cities[stop : stop + width]


def _geo(rows: list[Row]) -> list[Row]:
    return tag(rows, "geography", geography.GEONAMES_SOURCE)


def _cities_truth(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    cities = _city_window(ctx, geography.TRUTH_ID)
    wrong = geography.other_country(cities, geography.TRUTH_ID, f"{PURPOSE}wrong-country")
    return _geo(geography.truth_rows(cities, wrong, shift=False))


def _records_deception(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    cities = stable_shuffle(
        _city_window(ctx, geography.DECEPTION_ID), geography.DECEPTION_ID, f"{PURPOSE}order"
    )
    wrong = geography.other_country(cities, geography.DECEPTION_ID, f"{PURPOSE}wrong-country")
    return _geo(geography.records_rows(cities, wrong, shift=False))


def _city_pairs(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    """As many same-country as cross-country pairs (half each, as in the public splits)."""
    cities = _city_window(ctx, geography.PAIRS_ID)
    n = len(cities) // 2
    pairs = geography.city_pairs(cities, n, n, purpose=PURPOSE, strict=False)
    same = [p for p in pairs if p[0].country == p[1].country]
    diff = [p for p in pairs if p[0].country != p[1].country]
    k = min(len(same), len(diff))
    return _geo(geography.pair_rows(same[:k] + diff[:k]))


def _gsm8k(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    fresh = [p for p in gsm8k.load_problems(ctx) if p.id not in public_groups]
    return tag(gsm8k.problem_rows(fresh, shift=False), "mathematics", "gsm8k")


def _humaneval(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    fresh = [p for p in humaneval_hacks.load_problems(ctx) if p.group not in public_groups]
    if not fresh:  # every problem is in a public split: nothing to verify
        return []
    rows = humaneval_hacks.problem_rows(fresh, humaneval_hacks.verified_all(fresh, set()))
    return tag(rows, "code", "humaneval")


def _harmful_requests(ctx: BuildContext, public_groups: set[str]) -> list[Row]:
    """The requests no public split holds, length-matched as the builder matches its own."""
    fresh = [r for r in refusal.load_requests(ctx) if r.group not in public_groups]
    return refusal.request_rows(refusal.length_matched(fresh, f"{PURPOSE}main"))


#: task id -> the builder of its sealed pool (every task about its input text)
POOL_BUILDERS: dict[str, PoolBuilder] = {
    halueval.TASK_ID: _halueval_qa,
    geography.TRUTH_ID: _cities_truth,
    gsm8k.TASK_ID: _gsm8k,
    geography.PAIRS_ID: _city_pairs,
    geography.DECEPTION_ID: _records_deception,
    sandbagging_builder.TASK_ID: _sandbagging,
    eval_awareness.TASK_ID: _eval_awareness,
    humaneval_hacks.TASK_ID: _humaneval,
    persuasion_builder.TASK_ID: _persuasion,
    refusal.TASK_ID: _harmful_requests,
}


def sealed_pool_rows(task_id: str, ctx: BuildContext, public_rows: Iterable[dict]) -> list[dict]:
    """The sealed pool of ``task_id`` (split-file rows, sorted by id): its builder's rows without
    any group that touches ``public_rows`` (every public split of the task) by id, group or
    normalised text, nor one that repeats an earlier group's text. KeyError without a builder."""
    build = POOL_BUILDERS[task_id]
    public_ids: set[str] = set()
    public_groups: set[str] = set()
    public_texts: set[str] = set()
    for public in public_rows:
        public_ids.add(public["id"])
        public_groups.add(str(public.get("group", public["id"])))
        public_texts.add(text_hash(public.get("text", "")))
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in build(ctx, public_groups):
        groups[row.group].append(row.to_dict(task_id))
    pool: list[dict] = []
    seen_ids: set[str] = set()
    seen_texts: set[str] = set(public_texts)
    for name in sorted(groups):
        rows = groups[name]
        hashes = {text_hash(r["text"]) for r in rows}
        ids = {r["id"] for r in rows}
        if name in public_groups or ids & (public_ids | seen_ids) or hashes & seen_texts:
            continue
        pool.extend(rows)
        seen_ids |= ids
        seen_texts |= hashes
    return sorted(pool, key=lambda r: r["id"])
