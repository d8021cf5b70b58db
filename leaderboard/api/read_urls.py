"""The API under /api/: the OpenAPI schema and its docs, and the read endpoints under /api/v1/
(views in leaderboard/api/read/, one module per family of endpoints).

The write endpoints (POST /api/v1/submissions, the maintainer actions) are routed from
probebench/urls.py to leaderboard/api/write_urls.py (namespace "api-write")."""

from csp.constants import UNSAFE_INLINE
from csp.decorators import csp_update
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from leaderboard.api import compare as api_compare
from leaderboard.api.read import board, exports, probes, records, registry

app_name = "api"

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Redoc (served from drf-spectacular-sidecar) styles itself with injected <style> elements and
    # searches in a blob: worker: this page alone allows those (the site's CSP is in settings)
    path(
        "docs/",
        csp_update({"style-src": [UNSAFE_INLINE], "worker-src": ["blob:"]})(
            SpectacularRedocView.as_view(url_name="api:schema", template_name="leaderboard/api_docs.html")
        ),
        name="docs",
    ),
    # ---- read API (public, cached, ETag)
    path("v1/categories", registry.CategoryListApi.as_view(), name="categories"),
    path("v1/tasks", registry.TaskListApi.as_view(), name="tasks"),
    path("v1/models", registry.BaseModelListApi.as_view(), name="models"),
    path("v1/specs", registry.WeightsSpecListApi.as_view(), name="specs"),
    path("v1/leaderboard", board.LeaderboardApi.as_view(), name="leaderboard"),
    path("v1/leaderboard.csv", exports.LeaderboardCsvApi.as_view(), name="leaderboard-csv"),
    path("v1/leaderboard.json", exports.LeaderboardJsonExportApi.as_view(), name="leaderboard-json"),
    path("v1/probes/<slug:slug>", probes.ProbeDetailApi.as_view(), name="probe"),
    path("v1/compare", api_compare.CompareApi.as_view(), name="compare"),
    path("v1/reevaluations", records.ReevaluationListApi.as_view(), name="reevaluations"),
    path("v1/reevaluations/<str:quarter>", records.ReevaluationDetailApi.as_view(), name="reevaluation"),
    path(
        "v1/reevaluations/<str:quarter>/reveal",
        records.ReevaluationRevealApi.as_view(),
        name="reevaluation-reveal",
    ),
    path("v1/reference-updates", records.ReferenceUpdateListApi.as_view(), name="reference-updates"),
    path("v1/leakage", records.LeakageListApi.as_view(), name="leakage"),
    path("v1/exports", records.ExamplesExportListApi.as_view(), name="exports"),
    path("v1/bundles", records.BundleListApi.as_view(), name="bundles"),
    path("v1/queue", records.QueueApi.as_view(), name="queue"),
]
