"""The API under /api/: the OpenAPI schema and its docs, and the read endpoints under /api/v1/.

The submission endpoints (POST /api/v1/submissions, ...) are routed from probebench/urls.py to
leaderboard/api_submit_urls.py (namespace "api-submit")."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from leaderboard import api

app_name = "api"

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularRedocView.as_view(url_name="api:schema"), name="docs"),
    # ---- read API (public, cached, ETag)
    path("v1/categories", api.CategoryListApi.as_view(), name="categories"),
    path("v1/tasks", api.TaskListApi.as_view(), name="tasks"),
    path("v1/models", api.BaseModelListApi.as_view(), name="models"),
    path("v1/specs", api.WeightsSpecListApi.as_view(), name="specs"),
    path("v1/leaderboard", api.LeaderboardApi.as_view(), name="leaderboard"),
    path("v1/leaderboard.csv", api.LeaderboardCsvApi.as_view(), name="leaderboard-csv"),
    path("v1/leaderboard.json", api.LeaderboardJsonExportApi.as_view(), name="leaderboard-json"),
    path("v1/probes/<slug:slug>", api.ProbeDetailApi.as_view(), name="probe"),
    path("v1/reevaluations", api.ReevaluationListApi.as_view(), name="reevaluations"),
    path("v1/reevaluations/<str:quarter>", api.ReevaluationDetailApi.as_view(), name="reevaluation"),
    path("v1/reference-updates", api.ReferenceUpdateListApi.as_view(), name="reference-updates"),
    path("v1/leakage", api.LeakageListApi.as_view(), name="leakage"),
    path("v1/queue", api.QueueApi.as_view(), name="queue"),
]
