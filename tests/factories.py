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
    base_model_id = factory.LazyFunction(lambda: m.BaseModel.objects.order_by("slug").values_list("slug", flat=True).first())


class ProbeVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ProbeVersion

    probe = factory.SubFactory(ProbeFactory)
    number = 1
    artifact_sha256 = factory.Sequence(lambda n: hashlib.sha256(f"artifact-{n}".encode()).hexdigest())
    artifact_path = factory.LazyAttribute(lambda v: f"{v.artifact_sha256[:2]}/{v.artifact_sha256}.safetensors")
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
