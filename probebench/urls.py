from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("leaderboard.api_read_urls")),
    path("api/v1/", include(("leaderboard.api_write_urls", "api-write"))),
    path("", include("leaderboard.submit_urls")),
    path("", include("leaderboard.urls")),
]
