"""Public pages (namespace "leaderboard"). The researcher pages (sign-up, submit, a submission's
status, the API token) live in leaderboard/web/submit_urls.py (namespace "submit")."""

from django.urls import path, register_converter

from leaderboard.web import views


class ModelIdConverter:
    """A base model id of registry/models.yaml: a slug that may hold dots (qwen2.5-coder-0.5b-instruct)."""

    regex = r"[-a-zA-Z0-9_.]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ModelIdConverter, "model_id")

app_name = "leaderboard"

urlpatterns = [
    path("", views.index, name="index"),
    path("category/<slug:slug>/", views.category, name="category"),
    path("probes/<slug:slug>/", views.probe, name="probe"),
    path("probes/<slug:slug>/v<int:number>/artifact", views.artifact, name="artifact"),
    path("tasks/", views.task_list, name="tasks"),
    path("tasks/<slug:slug>/", views.task, name="task"),
    path("models/", views.model_list, name="models"),
    path("models/<model_id:slug>/", views.model, name="model"),
    path("methodology/", views.methodology, name="methodology"),
    path("compare/", views.compare, name="compare"),
    path("reevaluations/", views.reevaluation_list, name="reevaluations"),
    path("reevaluations/reference-updates/<int:pk>/", views.reference_update, name="reference_update"),
    path("reevaluations/<str:quarter>/", views.reevaluation, name="reevaluation"),
    path("leakage/", views.leakage, name="leakage"),
    path("exports/<str:quarter>/examples.jsonl.gz", views.examples_export, name="examples_export"),
    path("bundles/<str:bundle_id>.tar", views.bundle_file, name="bundle_file"),
    path(".well-known/probebench-board-key.pem", views.board_key, name="board_key"),
    path("queue/", views.queue, name="queue"),
]
