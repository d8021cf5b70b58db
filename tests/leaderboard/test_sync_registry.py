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
