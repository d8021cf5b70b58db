from io import StringIO

import pytest
from django.core.management import call_command

from leaderboard.models import Category, License, Task, TaskSplit, WeightsSpec

pytestmark = pytest.mark.django_db


def sync() -> str:
    out = StringIO()
    call_command("sync_registry", stdout=out)
    return out.getvalue()


def test_it_mirrors_the_registry_into_the_database():
    output = sync()
    assert "registry in sync" in output
    assert Category.objects.count() == 8
    assert License.objects.get(spdx_id="MIT").score == 0.95
    assert WeightsSpec.objects.get(version="v0.0.1").weights["auroc"] == 0.30
    assert TaskSplit.objects.count() == sum(t.splits.count() for t in Task.objects.all())


def test_running_it_twice_changes_nothing():
    sync()
    snapshot = [
        list(model.objects.order_by("pk").values())
        for model in (Category, License, WeightsSpec, Task, TaskSplit)
    ]
    second = sync()
    assert "registry in sync: 0 change(s)" in second
    again = [
        list(model.objects.order_by("pk").values())
        for model in (Category, License, WeightsSpec, Task, TaskSplit)
    ]
    assert again == snapshot


def test_a_changed_file_is_picked_up(settings, tmp_path):
    sync()
    License.objects.filter(spdx_id="MIT").update(score=0.5)
    assert "updated license MIT (score)" in sync()
    assert License.objects.get(spdx_id="MIT").score == 0.95


def test_a_model_loaded_on_request_is_active_only_where_the_deployment_names_it(settings):
    from leaderboard.models import BaseModel
    from leaderboard.services.runs import enabled_models

    qwen = "qwen2.5-coder-0.5b-instruct"
    settings.ENABLED_MODELS = []
    sync()
    assert not BaseModel.objects.get(slug=qwen).is_active
    assert qwen not in set(enabled_models().values_list("slug", flat=True))
    assert "smollm2-135m-instruct" in set(enabled_models().values_list("slug", flat=True))
    settings.ENABLED_MODELS = ["smollm2-135m-instruct", qwen]
    sync()
    assert BaseModel.objects.get(slug=qwen).is_active
    assert set(enabled_models().values_list("slug", flat=True)) == {"smollm2-135m-instruct", qwen}


def test_the_demo_leaves_out_reference_probes_on_models_it_does_not_run(tmp_path):
    import json

    from leaderboard.management.commands.install_reference_probes import entries_on_models

    for slug, model in (("a", "smollm2-135m-instruct"), ("b", "qwen2.5-coder-0.5b-instruct")):
        (tmp_path / slug).mkdir()
        (tmp_path / slug / "probe.json").write_text(json.dumps({"base_model": model}))
    entries = [{"slug": "a", "path": "a"}, {"slug": "b", "path": "b"}]
    kept, skipped = entries_on_models(entries, tmp_path, {"smollm2-135m-instruct"})
    assert [e["slug"] for e in kept] == ["a"] and [e["slug"] for e in skipped] == ["b"]
