"""No person can own the reference probes. They are installed under a system account that the
install makes itself (inactive, unusable password, a SystemAccount row): its name and look-alikes
are refused at sign-up and by ``create_api_token --create-user``, the install refuses a user of
that name it did not create, the account cannot log in or get a token, a copy of a reference file
submitted first does not block the install, and only the system account's probes can be the
eval-awareness reference."""

from __future__ import annotations

import importlib
import json
from io import StringIO
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from leaderboard.errors import ServiceError
from leaderboard.models import ApiToken, ProbeVersion, Submission, SystemAccount
from leaderboard.selectors.shared import ea_reference_version
from leaderboard.services.accounts import system_account_get_or_create
from leaderboard.services.submissions import submission_create
from leaderboard.services.tokens import api_token_create, api_token_digest
from tests.factories import ProbeFactory, ProbeVersionFactory, SubmissionFactory, UserFactory

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "registry" / "reference_probes" / "manifest.yaml"
EA = ROOT / "registry" / "reference_probes" / "ea-smollm2"
PASSWORD = "a-long-enough-pass-phrase-1"
SQUATS = ["probebench", "ProbeBench", "PROBE_BENCH", "pr0bebench", "prоbebench", "probebench-official"]


def _signup(client: Client, username: str):
    data = {"username": username, "email": "x@example.org", "password1": PASSWORD, "password2": PASSWORD}
    return client.post(reverse("submit:signup"), data, REMOTE_ADDR="203.0.113.9")


def _install(slug: str = "ea-smollm2") -> str:
    out = StringIO()
    call_command("install_reference_probes", only=slug, manifest=str(MANIFEST), stdout=out)
    return out.getvalue()


def _submit_copy(user) -> Submission:
    """``user`` submits the registry's eval-awareness reference file as their own probe (under a
    name of their own: the reference's name is reserved)."""
    metadata = json.loads((EA / "probe.json").read_text()) | {"name": f"{user.username}'s awareness probe"}
    with open(EA / "probe.safetensors", "rb") as fh:
        return submission_create(user=user, artifact=fh, metadata=metadata)


def _login(client: Client, url: str, username: str) -> bool:
    client.post(url, {"username": username, "password": PASSWORD}, REMOTE_ADDR="203.0.113.10")
    return "_auth_user_id" in client.session


# --------------------------------------------------------------------------- sign-up


@pytest.mark.django_db
@pytest.mark.parametrize("username", SQUATS)
def test_signing_up_as_the_system_account_or_a_look_alike_is_refused(client, username):
    response = _signup(client, username)
    assert response.status_code == 200
    assert "reserved" in response.content.decode()
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["admin", "Maintainers", "r00t"])
def test_names_that_read_as_the_site_are_refused_too(client, username):
    assert _signup(client, username).status_code == 200
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
def test_an_ordinary_name_still_signs_up(client):
    assert _signup(client, "ada-lovelace").status_code == 302
    assert get_user_model().objects.filter(username="ada-lovelace").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["probebench", "Probe.Bench"])
def test_create_api_token_does_not_create_a_reserved_user(username):
    with pytest.raises(CommandError, match="reserved"):
        call_command("create_api_token", username, "--create-user", stdout=StringIO(), stderr=StringIO())
    assert not get_user_model().objects.exists()


# --------------------------------------------------------------------------- the install


@pytest.mark.django_db
def test_the_install_refuses_a_user_of_its_name_that_it_did_not_create(registry):
    squatter = UserFactory(username="ProbeBench")  # signed up before the name was reserved
    squatter.set_password(PASSWORD)
    squatter.save()
    with pytest.raises(CommandError, match="did not create"):
        _install()
    assert not ProbeVersion.objects.exists() and not SystemAccount.objects.exists()


@pytest.mark.django_db
def test_the_install_makes_a_system_account_nobody_can_use(registry):
    _install()
    [account] = SystemAccount.objects.select_related("user")
    user = account.user
    assert user.username == "probebench"
    assert not user.is_active and not user.is_staff and not user.has_usable_password()
    [sub] = Submission.objects.all()
    assert sub.submitter == user and sub.probe_version.probe.owner == user
    assert sub.probe_version.probe.is_reference and sub.probe_version.probe.reference_role == "eval_awareness"
    assert "already submitted" in _install()  # run again: nothing new
    assert Submission.objects.count() == 1


@pytest.mark.django_db
def test_a_copy_submitted_first_does_not_block_the_install(registry, stranger):
    copy = _submit_copy(stranger)
    output = _install()
    assert "already submitted" not in output
    system = SystemAccount.objects.get().user
    installed = Submission.objects.get(submitter=system)
    reference = installed.probe_version
    assert reference.probe.is_reference and reference.probe.reference_role == "eval_awareness"
    assert reference.artifact_sha256 == ProbeVersion.objects.get(pk=copy.probe_version_id).artifact_sha256
    copy.refresh_from_db()
    assert copy.status == "rejected" and reference.probe.slug in copy.rejection_reason
    assert ProbeVersion.objects.get(pk=copy.probe_version_id).displaced_by_reference
    # the file is accepted once more, no further: a third copy is a 409 naming the reference
    with pytest.raises(ServiceError) as refused:
        _submit_copy(UserFactory(username="eve"))
    assert refused.value.status_code == 409 and refused.value.extra["existing_probe"] == reference.probe.slug


@pytest.mark.django_db
def test_nobody_else_can_submit_a_reference_probe(registry, maintainer):
    metadata = json.loads((EA / "probe.json").read_text())
    with open(EA / "probe.safetensors", "rb") as fh, pytest.raises(ServiceError, match="system account"):
        submission_create(
            user=maintainer,
            artifact=fh,
            metadata=metadata,
            is_reference=True,
            reference_role="eval_awareness",
        )


# --------------------------------------------------------------------------- the eval-awareness reference


def _scored_ea_version(owner, *, created_at):
    probe = ProbeFactory(
        owner=owner, category_id="eval_awareness", is_reference=True, reference_role="eval_awareness"
    )
    version = ProbeVersionFactory(probe=probe, created_at=created_at)
    SubmissionFactory(probe_version=version, status="scored")
    return version


@pytest.mark.django_db
def test_a_probe_nobody_but_the_system_account_owns_never_becomes_the_eval_awareness_reference(registry):
    system = system_account_get_or_create()
    squatter = UserFactory(username="squatter")
    ours = _scored_ea_version(system, created_at=timezone.now() - timezone.timedelta(days=1))
    # a probe marked as the eval-awareness reference but owned by a person (an install that a
    # squatter's account received before this release), with a newer scored version
    theirs = _scored_ea_version(squatter, created_at=timezone.now())
    newer = ProbeVersionFactory(probe=theirs.probe, number=2)
    SubmissionFactory(probe_version=newer, status="scored")
    assert ea_reference_version(base_model=ours.probe.base_model) == ours


@pytest.mark.django_db
def test_a_squatted_reference_probe_is_no_reference_even_alone(registry):
    from leaderboard.selectors.shared import is_ea_reference_candidate

    theirs = _scored_ea_version(UserFactory(username="squatter"), created_at=timezone.now())
    assert not is_ea_reference_candidate(theirs)  # so scoring it starts no reference update
    assert ea_reference_version(base_model=theirs.probe.base_model) is None


# --------------------------------------------------------------------------- logging in, tokens


@pytest.fixture
def system_user(db):
    """The system account, with a password and made active, as a careless admin might leave it."""
    user = system_account_get_or_create()
    user.set_password(PASSWORD)
    user.is_active = True
    user.is_staff = True
    user.save()
    return user


@pytest.mark.django_db
def test_the_system_account_cannot_log_in_to_the_site_or_the_admin(system_user):
    assert not _login(Client(), reverse("login"), "probebench")
    assert not _login(Client(), reverse("admin:login"), "probebench")
    # an ordinary account with the same password does log in: the refusal is about the account
    person = UserFactory(username="ada")
    person.set_password(PASSWORD)
    person.save()
    assert _login(Client(), reverse("login"), "ada")


@pytest.mark.django_db
def test_a_session_of_the_system_account_is_not_honoured(system_user):
    client = Client()
    client.force_login(system_user, backend="leaderboard.authentication.AccountBackend")
    assert client.get(reverse("submit:new")).status_code == 302  # sent to the login page


@pytest.mark.django_db
def test_the_system_account_gets_no_api_token(system_user):
    with pytest.raises(CommandError, match="system account"):
        call_command("create_api_token", "probebench", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(ServiceError):
        api_token_create(user=system_user)
    assert not ApiToken.objects.exists()
    # a token row made behind the service's back is refused at the door
    ApiToken.objects.create(user=system_user, prefix="0" * 8, digest=api_token_digest(key="0" * 40))
    response = Client().get("/api/v1/submissions", HTTP_AUTHORIZATION=f"Token {'0' * 40}")
    assert response.status_code == 401


# --------------------------------------------------------------------------- upgrading a board


def _adopt():
    migration = importlib.import_module("leaderboard.migrations.0013_system_account")
    migration.old_install_account_adopt(django_apps, None)


@pytest.mark.django_db
def test_the_migration_adopts_the_old_installs_account_but_not_a_person_s():
    User = get_user_model()
    person = User.objects.create_user(username="probebench", password=PASSWORD)
    _adopt()
    assert not SystemAccount.objects.exists()
    person.delete()
    old = User.objects.create_user(username="probebench", is_staff=True)  # the old install's: no password
    old.set_unusable_password()
    old.save()
    ApiToken.objects.create(user=old, prefix="1" * 8, digest=api_token_digest(key="1" * 40))
    _adopt()
    old.refresh_from_db()
    assert SystemAccount.objects.get().user == old and not old.is_active and not old.is_staff
    assert not ApiToken.objects.exists()
