from django.urls import path

from leaderboard import views

app_name = "leaderboard"

urlpatterns = [
    path("", views.index, name="index"),
    path("category/<slug:slug>/", views.category, name="category"),
    path("probes/<slug:slug>/", views.probe, name="probe"),
    path("tasks/<slug:slug>/", views.task, name="task"),
    path("models/<slug:slug>/", views.model, name="model"),
    path("submissions/<int:pk>/", views.submission, name="submission"),
    path("reevaluations/<str:quarter>/", views.reevaluation, name="reevaluation"),
]
