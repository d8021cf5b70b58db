from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.defaults import page_not_found
from django.views.generic import RedirectView

from leaderboard.api.errors import api_not_found
from probebench.health import health

urlpatterns = [
    # browsers ask for /favicon.ico whatever the page links: send them to the SVG icon
    path("favicon.ico", RedirectView.as_view(url=static("leaderboard/favicon.svg"), permanent=True)),
    path("health", health, name="health"),  # each service ok or down (probebench/health.py)
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("leaderboard.api.read_urls")),
    path("api/v1/", include(("leaderboard.api.write_urls", "api-write"))),
    path("", include("leaderboard.web.submit_urls")),
    path("", include("leaderboard.web.urls")),
]


def handler404(request, exception):
    """A path no route matches: under /api/ the API's JSON error body, elsewhere the styled page."""
    if request.path_info.startswith("/api/"):
        return api_not_found(request)
    return page_not_found(request, exception)
