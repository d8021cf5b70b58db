"""Routes of the write API, included under /api/v1/ (namespace "api-write"): submissions
(leaderboard/api/submissions.py), maintainer actions (leaderboard/api/maintainers.py) and
replication receipts (leaderboard/api/replications.py)."""

from django.urls import path

from leaderboard.api.maintainers import ReevaluationStartApi
from leaderboard.api.replications import ReplicationCreateApi
from leaderboard.api.submissions import SubmissionDetailApi, SubmissionListCreateApi

urlpatterns = [
    path("submissions", SubmissionListCreateApi.as_view(), name="submissions"),
    path("submissions/<int:pk>", SubmissionDetailApi.as_view(), name="submission-detail"),
    path("maintainer/reevaluations", ReevaluationStartApi.as_view(), name="reevaluation-start"),
    path("replications", ReplicationCreateApi.as_view(), name="replications"),
]
