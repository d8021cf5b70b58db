from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    # browsers ask for /favicon.ico whatever the page links: send them to the SVG icon
    path("favicon.ico", RedirectView.as_view(url=static("leaderboard/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("leaderboard.api.read_urls")),
    path("api/v1/", include(("leaderboard.api.write_urls", "api-write"))),
    path("", include("leaderboard.web.submit_urls")),
    path("", include("leaderboard.web.urls")),
]
