"""Routes of the write API, included under /api/v1/ (namespace "api-write"): submissions
(leaderboard/api_submissions.py) and maintainer actions (leaderboard/api_maintainers.py)."""

from django.urls import path

from leaderboard.api_maintainers import ReevaluationStartApi
from leaderboard.api_submissions import SubmissionDetailApi, SubmissionListCreateApi

urlpatterns = [
    path("submissions", SubmissionListCreateApi.as_view(), name="submissions"),
    path("submissions/<int:pk>", SubmissionDetailApi.as_view(), name="submission-detail"),
    path("maintainer/reevaluations", ReevaluationStartApi.as_view(), name="reevaluation-start"),
]
