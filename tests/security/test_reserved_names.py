"""Names that pass for the site's own: the system account's and its look-alikes at sign-up, and the
reference probes' names and slugs on a submission, compared by their Unicode confusable skeletons
(UTS #39, ICU's). A probe of anyone else's that holds a reference probe's slug (from before the
names were reserved) does not push the reference to ``<slug>-2``, and a copy of a reference file
set aside by the install takes no new versions."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils.text import slugify
from rest_framework.test import APIClient

from leaderboard.errors import ServiceError
from leaderboard.models import Probe, ProbeVersion, Submission
from leaderboard.services.accounts import system_account_get_or_create
from leaderboard.services.submissions import submission_create
from tests.factories import ProbeFactory, ProbeVersionFactory, SubmissionFactory, UserFactory
from tests.leaderboard.test_submission_validation import linear_probe_bytes, metadata, post

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "registry" / "reference_probes" / "manifest.yaml"
EA = ROOT / "registry" / "reference_probes" / "ea-smollm2"
EA_NAME = json.loads((EA / "probe.json").read_text())["name"]
EA_SLUG = slugify(EA_NAME)
PASSWORD = "a-long-enough-pass-phrase-1"

#: spellings of ``probebench`` that UTS #39 calls confusable with it, each made of letters a
#: username may hold; a hand list of Cyrillic and Greek letters let every one of them through
LOOK_ALIKES = {
    "Cyrillic shha": "probebenc\u04bbh",
    "Armenian oh": "pr\u0585bebench",
    "Armenian vo": "probebe\u0578ch",
    "small capital O": "pr\u1d0fbebench",
    "small capital C": "probeben\u1d04h",
    "Coptic ro": "\u2ca3robebench",
    "Cherokee small mv": "\uabb2robebench",
    "Cherokee small ve": "probe\u13fcench",
}


@pytest.fixture
def api(registry, researcher):
    client = APIClient()
    client.force_authenticate(user=researcher)
    return client


def _signup(client: Client, username: str):
    data = {"username": username, "email": "x@example.org", "password1": PASSWORD, "password2": PASSWORD}
    return client.post(reverse("submit:signup"), data, REMOTE_ADDR="203.0.113.9")


# --------------------------------------------------------------------------- sign-up


@pytest.mark.django_db
@pytest.mark.parametrize("username", list(LOOK_ALIKES.values()), ids=list(LOOK_ALIKES))
def test_a_look_alike_of_the_system_name_is_refused_at_sign_up(client, username):
    response = _signup(client, username)
    assert response.status_code == 200  # the form again, with the error on its field
    errors = response.context["form"].errors
    assert "reserved" in " ".join(errors["username"])
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["probity", "bench-probe", "Иван", "ベンチ"])
def test_a_name_that_only_shares_letters_or_a_script_signs_up(client, username):
    assert _signup(client, username).status_code == 302
    assert get_user_model().objects.filter(username=username).exists()


# --------------------------------------------------------------------------- probe names

#: what a submitter may call a probe that takes the eval-awareness reference probe's name or slug
TAKEN = {
    "the name": EA_NAME,
    "the name in other letter case": EA_NAME.upper(),
    "a look-alike (Cyrillic о)": EA_NAME.replace("probe", "pr\u043ebe"),
    "a look-alike NFKC would change (lunate sigma for c)": EA_NAME.replace("reference", "referen\u03f2e"),
    "the same slug": "eval awareness: reference probe / SmolLM2 135M Instruct",
    "the same slug with accents": EA_NAME.replace("Eval", "\u00c9v\u00e0l"),
    "the board slug": EA_SLUG,
    "the manifest slug": "EA-SmolLM2",
}


@pytest.mark.django_db
@pytest.mark.parametrize("name", list(TAKEN.values()), ids=list(TAKEN))
def test_a_submission_under_a_reference_probe_s_name_is_400_naming_the_field(api, name):
    response = post(api, linear_probe_bytes(seed=11), metadata(name=name))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "name"
    assert f"reserved for the reference probe {EA_NAME!r}" in body["error"]
    assert not Probe.objects.exists() and not Submission.objects.exists()


@pytest.mark.django_db
def test_a_name_of_one_s_own_is_still_accepted(api):
    response = post(api, linear_probe_bytes(seed=12), metadata(name=f"{EA_NAME} replication, by Ada"))
    assert response.status_code == 201, response.content


@pytest.mark.django_db
def test_the_web_form_refuses_a_reference_probe_s_name_next_to_the_field(client, registry, researcher):
    client.force_login(researcher)
    meta = metadata(name=EA_NAME)
    form = {k: v for k, v in meta.items() if k not in ("authors", "training_data")} | {"authors": "Ada"}
    form["artifact"] = SimpleUploadedFile("probe.safetensors", linear_probe_bytes(seed=13))
    response = client.post(reverse("submit:new"), form)
    assert response.status_code == 400
    assert "reserved for the reference probe" in " ".join(response.context["form"].errors["name"])
    assert not Probe.objects.exists()


# --------------------------------------------------------------------------- the install


def _install(slug: str = "ea-smollm2") -> str:
    out = StringIO()
    call_command("install_reference_probes", only=slug, manifest=str(MANIFEST), stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_a_probe_that_took_a_reference_slug_before_it_was_reserved_is_moved_aside(registry):
    squatter = UserFactory(username="squatter")
    theirs = ProbeFactory(slug=EA_SLUG, name=EA_NAME, owner=squatter, category_id="eval_awareness")
    version = ProbeVersionFactory(probe=theirs)
    SubmissionFactory(probe_version=version, status="scored")

    output = _install()

    reference = Probe.objects.get(owner=system_account_get_or_create())
    assert reference.slug == EA_SLUG  # its own slug, not EA_SLUG-2
    theirs.refresh_from_db()
    assert theirs.slug == f"{EA_SLUG}-renamed-{theirs.pk}" and theirs.owner == squatter
    assert theirs.name.endswith("(not the reference probe)") and not theirs.is_reference
    assert theirs.versions.get() == version  # nothing else about it changes
    assert f"{EA_SLUG!r}" in output and "squatter" in output and theirs.slug in output


@pytest.mark.django_db
def test_a_copy_set_aside_by_the_install_takes_no_new_version(registry, stranger):
    meta = json.loads((EA / "probe.json").read_text()) | {"name": "Mallory's awareness probe"}
    with open(EA / "probe.safetensors", "rb") as fh:
        copy = submission_create(user=stranger, artifact=fh, metadata=meta)
    slug = copy.probe_version.probe.slug
    output = _install()
    assert ProbeVersion.objects.get(pk=copy.probe_version_id).displaced_by_reference
    assert "set aside" in output

    new_version = meta | {"probe": slug}
    with pytest.raises(ServiceError) as refused:
        submission_create(
            user=stranger,
            artifact=SimpleUploadedFile("p.safetensors", linear_probe_bytes(seed=14)),
            metadata=new_version,
        )
    assert refused.value.status_code == 400 and refused.value.field == "probe"
    assert "set aside" in refused.value.message
    assert Probe.objects.get(slug=slug).versions.count() == 1
