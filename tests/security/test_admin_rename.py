"""A probe renamed in the admin follows the submission's text rules: NFC, no control or
bidirectional-override characters, 3 to 160 characters (the admin's form took any text before, so
a maintainer could give a probe a name that the submission would have refused)."""

import pytest

from leaderboard.models import Probe
from tests.factories import ProbeFactory

pytestmark = pytest.mark.django_db

INLINE_FORMS = {
    "probeversion_set-TOTAL_FORMS": "0",
    "probeversion_set-INITIAL_FORMS": "0",
    "versions-TOTAL_FORMS": "0",
    "versions-INITIAL_FORMS": "0",
}


@pytest.fixture
def probe(registry):
    return ProbeFactory(name="A fine probe")


def _rename(client, maintainer, probe, name: str):
    client.force_login(maintainer)
    return client.post(f"/admin/leaderboard/probe/{probe.pk}/change/", {"name": name, **INLINE_FORMS})


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("probe\u202egnp.exe", "U+202E"),
        ("Ada\u200e probe", "U+200E"),
        ("bell\u0007name", "U+0007"),
        ("line\nbreak", "U+000A"),
        ("n" * 161, "at most 160"),
        ("ab", "must be 3 to 160 characters"),
    ],
)
def test_a_rename_the_submission_would_refuse_is_refused_naming_the_rule(
    client, maintainer, probe, name, says
):
    response = _rename(client, maintainer, probe, name)
    assert response.status_code == 200  # the form again, with the error
    errors = response.context["adminform"].form.errors
    assert says in " ".join(errors["name"]), errors
    assert Probe.objects.get(pk=probe.pk).name == "A fine probe"


def test_a_rename_is_stored_in_nfc(client, maintainer, probe):
    response = _rename(client, maintainer, probe, "Cafe\u0301 probe")
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Probe.objects.get(pk=probe.pk).name == "Caf\u00e9 probe"
