"""Seed a throwaway database with SYNTHETIC board data for bench/bench_board.py.

Every row written here is synthetic (random measurements, scored by the real ProbeScore function):
probe names start with "SYNTHETIC", tasks are "bench-synthetic-*", and the owner is "bench-synthetic".
Call it only on a database created for the benchmark, never on the demo or a real database;
:func:`seed` refuses a database that already holds a probe that is not synthetic.
"""

from __future__ import annotations

import hashlib
import random

SYNTHETIC_OWNER = "bench-synthetic"


def _roc(auroc: float, n: int = 60) -> list[list[float]]:
    k = max(1 / max(auroc, 1e-3) - 1, 1e-3)
    return [[round(i / n, 4), round((i / n) ** k, 4)] for i in range(n + 1)]


def _reliability(rng: random.Random) -> list[dict]:
    out = []
    for b in range(10):
        lo, hi = b / 10, (b + 1) / 10
        mean = round(rng.uniform(lo, hi), 4)
        out.append(
            {
                "bin": b,
                "lo": lo,
                "hi": hi,
                "n": rng.randint(5, 60),
                "mean_prob": mean,
                "positive_rate": round(min(max(mean + rng.gauss(0, 0.08), 0), 1), 4),
            }
        )
    return out


def seed(
    *,
    n_probes: int = 1000,
    n_tasks: int = 10,
    categories: tuple[str, ...] = ("hallucination",),
    rng_seed: int = 0,
    detailed: int | None = None,
) -> dict:
    """Create ``n_probes`` scored probes, each with results on ``n_tasks`` tasks of its category,
    spread round-robin over ``categories`` (one category: the worst case for a category page).

    ``detailed``: how many of them (the first ones) get full per-task results with ROC points and
    reliability bins, as the pipeline writes them (default: all); the others get the per-task
    numbers only, which keeps a 50,000-probe database small (no board query reads the curves)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from evaluator.data.registry.licenses import LicenseSpec
    from evaluator.data.registry.weights import WeightsSpec as SpecData
    from evaluator.metrics.scoring import Measurements, probe_score
    from leaderboard import models as m

    if m.Probe.objects.exclude(owner__username=SYNTHETIC_OWNER).exists():
        raise SystemExit("refusing to seed synthetic data into a database that holds real probes")
    rng = random.Random(rng_seed)
    User = get_user_model()
    with transaction.atomic():
        owner, _ = User.objects.get_or_create(
            username=SYNTHETIC_OWNER, defaults={"email": "bench@example.invalid"}
        )
        models = list(m.BaseModel.objects.order_by("slug"))
        if not models:
            models = [
                m.BaseModel.objects.create(
                    slug=f"bench-synthetic-model-{i}",
                    name=f"SYNTHETIC model {i}",
                    family="synthetic",
                    architecture="llama",
                    n_layers=30,
                    d_model=576,
                    weights_license="Apache-2.0",
                    weights_sha256=hashlib.sha256(f"model{i}".encode()).hexdigest(),
                )
                for i in range(3)
            ]
        tasks: dict[str, list] = {}
        for category in categories:
            for i in range(n_tasks):
                task, _ = m.Task.objects.get_or_create(
                    slug=f"bench-synthetic-{category.replace('_', '-')}-{i}-v1",
                    defaults={
                        "category_id": category,
                        "family": "synthetic",
                        "name": f"SYNTHETIC task {i}",
                        "positive": "synthetic positive",
                        "negative": "synthetic negative",
                        "description": "Synthetic benchmark task (bench/seed_board.py); not real data.",
                        "source": {"package": "synthetic", "version": "0", "license": "CC0-1.0"},
                    },
                )
                for split, rows in (("train", 600), ("test", 300), ("distshift", 120), ("holdout_pool", 400)):
                    m.TaskSplit.objects.get_or_create(
                        task=task,
                        name=split,
                        defaults={
                            "path": f"synthetic/{task.slug}/{split}.jsonl",
                            "rows": rows,
                            "sha256": hashlib.sha256(f"{task.slug}/{split}".encode()).hexdigest(),
                        },
                    )
                tasks.setdefault(category, []).append(task)
        licenses = {
            lic.spdx_id: LicenseSpec(lic.spdx_id, lic.name, lic.score) for lic in m.License.objects.all()
        }
        license_ids = sorted(licenses)
        specs = list(m.WeightsSpec.objects.all())
        spec_data = [
            SpecData(s.version, s.released, s.description, s.weights, s.imputation, s.sha256) for s in specs
        ]

        start = m.Probe.objects.count()
        probes = m.Probe.objects.bulk_create(
            m.Probe(
                slug=f"synthetic-{start + i:05d}",
                name=f"SYNTHETIC probe {start + i}",
                owner=owner,
                category_id=categories[i % len(categories)],
                base_model=models[i % len(models)],
                stability_quarters=rng.choice([0, 0, 1, 2, 3]),
                status="deprecated" if rng.random() < 0.03 else "active",
                deprecated_reason="synthetic deprecation",
            )
            for i in range(n_probes)
        )
        versions = m.ProbeVersion.objects.bulk_create(
            m.ProbeVersion(
                probe=p,
                number=1,
                artifact_sha256=hashlib.sha256(p.slug.encode()).hexdigest(),
                artifact_path=f"synthetic/{p.slug}.safetensors",
                artifact_bytes=2400,
                kind="linear",
                layer=15,
                position="last_token",
                input="single",
                output="logit",
                license_id=rng.choice(license_ids),
                authors=[f"Synthetic Author {rng.randint(1, 200)}"],
                metadata={"name": p.name, "synthetic": True},
                reproduced=rng.choice([True, False, None]),
                declared_gaps={"auroc": {"declared": 0.95, "measured": 0.8, "gap": 0.15}}
                if rng.random() < 0.05
                else {},
            )
            for p in probes
        )
        m.Submission.objects.bulk_create(
            m.Submission(probe_version=v, submitter=owner, status="scored", via="seed", progress=1.0)
            for v in versions
        )
        scores = []
        for k, v in enumerate(versions):
            full = detailed is None or k < detailed
            auroc = rng.uniform(0.55, 0.97)
            recall = rng.uniform(0.0, auroc - 0.5)
            measured = {
                "auroc": auroc,
                "ece": rng.uniform(0.01, 0.3),
                "latency_ms": rng.uniform(0.5, 50),
                "license": v.license_id,
            }
            if rng.random() < 0.6:
                measured["auroc_ea"] = auroc * rng.uniform(0.8, 1.0)
            if rng.random() < 0.7:
                measured["auroc_ds"] = auroc * rng.uniform(0.7, 1.0)
            if rng.random() < 0.5:
                measured["rho_ce"] = rng.uniform(0, 0.9)
            per_task = {}
            for t in tasks[v.probe.category_id]:
                a = min(max(auroc + rng.gauss(0, 0.03), 0.5), 0.999)
                per_task[t.slug] = {
                    "auroc": a,
                    "auroc_ci": [a - 0.03, min(a + 0.03, 1.0)],
                    "auroc_ea": a * 0.9,
                    "auroc_ea_imputed": "auroc_ea" not in measured,
                    "auroc_ds": a * 0.8,
                    "auroc_ds_imputed": "auroc_ds" not in measured,
                    "ece": measured["ece"],
                    "brier": 0.2,
                    "recall_at_1pct_fpr": recall,
                    "threshold_1pct_fpr": 2.3,
                    "fpr_at_1pct_threshold": 0.01,
                    "n_test": 300,
                    "baselines": {"random_direction": 0.5, "diff_of_means": a - 0.04},
                    "lift": {"random_direction": a - 0.5, "diff_of_means": 0.04},
                }
                if full:
                    per_task[t.slug] |= {"roc": _roc(a), "reliability": _reliability(rng)}
            extra = {
                # the pipeline stores the bootstrap interval of the category mean (services/scores.py)
                "auroc_ci": [auroc - 0.02, min(auroc + 0.02, 1.0)],
                "brier": 0.2,
                "recall_at_1pct_fpr": recall,
                "fpr_at_1pct_threshold": 0.01,
                "latency_device": "cpu (synthetic)",
                "model_forward_ms": 10.0,
                "transfer": {mm.slug: rng.uniform(0, 0.9) for mm in models if mm.pk != v.probe.base_model_id},
            }
            for spec, data in zip(specs, spec_data, strict=True):
                result = probe_score(Measurements.from_dict(measured), spec=data, licenses=licenses)
                scores.append(
                    m.Score(
                        probe_version=v,
                        spec=spec,
                        total=result.total,
                        measured_total=result.measured_total,
                        components=result.to_dict()["components"],
                        measurements=measured | extra,
                        per_task=per_task,
                    )
                )
        m.Score.objects.bulk_create(scores, batch_size=200)
    return {
        "probes": len(probes),
        "tasks_per_category": n_tasks,
        "categories": list(categories),
        "scores": len(scores),
    }
