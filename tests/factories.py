"""factory_boy factories for the data model. Registry rows (categories, licenses, models, tasks,
specs) come from ``sync_registry`` in the ``registry`` fixture; these build what users create."""

import hashlib

import factory
from django.contrib.auth import get_user_model

from leaderboard import models as m


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"researcher{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password("correct horse battery staple")


class ProbeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Probe

    slug = factory.Sequence(lambda n: f"probe-{n}")
    name = factory.LazyAttribute(lambda p: f"Probe {p.slug}")
    owner = factory.SubFactory(UserFactory)
    category_id = "hallucination"
    base_model_id = factory.LazyFunction(
        lambda: m.BaseModel.objects.order_by("slug").values_list("slug", flat=True).first()
    )


class ProbeVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ProbeVersion

    probe = factory.SubFactory(ProbeFactory)
    number = 1
    artifact_sha256 = factory.Sequence(lambda n: hashlib.sha256(f"artifact-{n}".encode()).hexdigest())
    artifact_path = factory.LazyAttribute(
        lambda v: f"{v.artifact_sha256[:2]}/{v.artifact_sha256}.safetensors"
    )
    artifact_bytes = 2400
    kind = "linear"
    layer = 15
    position = "last_token"
    input = "single"
    output = "logit"
    license_id = "Apache-2.0"
    metadata = factory.LazyAttribute(lambda v: {"name": v.probe.name})


class SubmissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Submission

    probe_version = factory.SubFactory(ProbeVersionFactory)
    submitter = factory.LazyAttribute(lambda s: s.probe_version.probe.owner)


class LeakageRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.LeakageRecord

    probe = factory.SubFactory(ProbeFactory)
    source = m.LeakageRecord.Source.MAINTAINER
    summary = "trained on the test split"


# --------------------------------------------------------------------------- board data
# Registry mirrors for tests that need rows the registry files do not (yet) hold, and the measured
# rows (runs, scores, cycles) that the pipeline writes in production.


class BaseModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.BaseModel
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"test-model-{n}")
    name = factory.LazyAttribute(lambda b: f"Test model {b.slug}")
    family = "test"
    architecture = "llama"
    n_layers = 30
    d_model = 576
    weights_license = "Apache-2.0"
    weights_sha256 = factory.LazyAttribute(lambda b: hashlib.sha256(b.slug.encode()).hexdigest())


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Task
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"test-task-{n}-v1")
    category_id = "hallucination"
    family = "test"
    name = factory.LazyAttribute(lambda t: f"Test task {t.slug}")
    positive = "the answer is hallucinated"
    negative = "the answer is right"
    source = factory.LazyFunction(lambda: {"package": "test-pkg", "version": "1.0", "license": "MIT"})
    templates = factory.LazyFunction(lambda: {"single": "{text}"})
    minted = "2026-01-01"


class TaskSplitFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.TaskSplit

    task = factory.SubFactory(TaskFactory)
    name = "test"
    path = factory.LazyAttribute(lambda s: f"registry/splits/{s.task.slug}/{s.name}.jsonl")
    rows = 300
    sha256 = factory.LazyAttribute(lambda s: hashlib.sha256(s.path.encode()).hexdigest())


def probe_score_for(*, spec: m.WeightsSpec, measured: dict):
    """The real ProbeScore (evaluator.metrics.scoring) of ``measured`` under a WeightsSpec row."""
    from evaluator.data.registry.licenses import LicenseSpec
    from evaluator.data.registry.weights import WeightsSpec as SpecData
    from evaluator.metrics.scoring import Measurements, probe_score

    licenses = {lic.spdx_id: LicenseSpec(lic.spdx_id, lic.name, lic.score) for lic in m.License.objects.all()}
    data = SpecData(spec.version, spec.released, spec.description, spec.weights, spec.imputation, spec.sha256)
    return probe_score(Measurements.from_dict(measured), spec=data, licenses=licenses)


class ScoreFactory(factory.django.DjangoModelFactory):
    """A Score computed by the real scoring function from ``measured`` (Measurements.from_dict
    keys) under ``spec``; ``extra_measurements`` and ``per_task`` are stored beside it."""

    class Meta:
        model = m.Score
        exclude = ("measured", "extra_measurements", "_score")

    probe_version = factory.SubFactory(ProbeVersionFactory)
    spec = factory.LazyFunction(lambda: m.WeightsSpec.objects.get(version="v0.0.1"))
    measured = factory.LazyAttribute(
        lambda s: {"auroc": 0.8, "ece": 0.05, "latency_ms": 0.05, "license": s.probe_version.license_id}
    )
    extra_measurements = factory.LazyFunction(dict)
    _score = factory.LazyAttribute(lambda s: probe_score_for(spec=s.spec, measured=s.measured))
    total = factory.LazyAttribute(lambda s: s._score.total)
    measured_total = factory.LazyAttribute(lambda s: s._score.measured_total)
    components = factory.LazyAttribute(lambda s: s._score.to_dict()["components"])
    measurements = factory.LazyAttribute(
        lambda s: (
            {k: v for k, v in s.measured.items() if k not in ("ea_not_applicable", "goodhart")}
            | s.extra_measurements
        )
    )
    per_task = factory.LazyFunction(dict)


class EvaluationRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.EvaluationRun

    probe_version = factory.SubFactory(ProbeVersionFactory)
    kind = m.EvaluationRun.Kind.SCORE
    task = factory.SubFactory(TaskFactory)
    split = "test"
    base_model = factory.LazyAttribute(lambda r: r.probe_version.probe.base_model)
    status = m.EvaluationRun.Status.SUCCEEDED


class ReevaluationCycleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ReevaluationCycle

    quarter = factory.Sequence(lambda n: f"{2026 + n // 4}Q{n % 4 + 1}")
    triggered_by = factory.SubFactory(UserFactory, is_staff=True)
    status = m.ReevaluationCycle.Status.COMPLETED


class CycleResultFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.CycleResult

    cycle = factory.SubFactory(ReevaluationCycleFactory)
    probe_version = factory.SubFactory(ProbeVersionFactory)
    reference_auroc = 0.8
    holdout_auroc = 0.79
    test_auroc = 0.8
    drop_points = factory.LazyAttribute(
        lambda r: None if r.holdout_auroc is None else round((r.reference_auroc - r.holdout_auroc) * 100, 6)
    )
    outcome = m.CycleResult.Outcome.HELD
