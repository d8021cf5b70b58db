"""Researcher pages: sign-up, submit, a submission's status, the API token (namespace "submit")."""

from django.urls import path

from leaderboard.web import submit as views_submit

app_name = "submit"

urlpatterns = [
    path("signup/", views_submit.signup, name="signup"),
    path("submit/", views_submit.submit, name="new"),
    path("my/submissions/", views_submit.my_submissions, name="mine"),
    path("my/submissions/<int:pk>/", views_submit.submission_detail, name="detail"),
    path("my/submissions/<int:pk>/status/", views_submit.submission_status, name="status"),
    path("account/", views_submit.account, name="account"),
    path("account/token/", views_submit.account_token, name="token"),
]
