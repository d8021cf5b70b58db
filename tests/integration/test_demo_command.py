"""`manage.py demo` (what `make demo` runs): it starts its own worker, submits the reference
probes of a manifest through the normal path — the eval-awareness reference first — and, with
--no-serve, waits until they are scored."""

from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from leaderboard.models import Score, Submission

pytestmark = [pytest.mark.model, pytest.mark.django_db(transaction=True)]


def test_demo_scores_the_manifest_with_its_own_worker(mini, trained, worker_env, monkeypatch, tmp_path):
    for key in (
        "PROBEBENCH_DB_NAME",
        "PROBEBENCH_REGISTRY_ROOT",
        "PROBEBENCH_MODELS",
        "CELERY_TASK_ALWAYS_EAGER",
    ):
        monkeypatch.setenv(key, worker_env[key])
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "probes": [
                    {"slug": "truth", "path": str(trained["truth"]), "role": ""},
                    {"slug": "ea-reference", "path": str(trained["reference"]), "role": "eval_awareness"},
                ],
            }
        )
    )
    out = StringIO()
    call_command("demo", manifest=str(manifest), no_serve=True, stdout=out)
    subs = list(Submission.objects.select_related("probe_version__probe").order_by("pk"))
    assert [s.probe_version.probe.reference_role for s in subs] == ["eval_awareness", ""]  # reference first
    assert all(s.status == "scored" for s in subs), [s.failure_reason for s in subs]
    truth = Score.objects.get(probe_version=subs[1].probe_version, spec_id="v0.0.1")
    assert not truth.components["auroc_ea"]["imputed"]  # measured with the reference probe
    assert "ProbeScore" in out.getvalue()
    # running it again submits nothing twice
    call_command("demo", manifest=str(manifest), no_serve=True, stdout=StringIO())
    assert Submission.objects.count() == 2
