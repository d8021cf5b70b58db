"""What every read endpoint shares: the base view and the probe id pattern of its paths."""

from __future__ import annotations

from django.urls.converters import SlugConverter
from rest_framework.views import APIView

#: a probe id in a URL path (the ``slug`` converter of the URL conf, leaderboard/api/read_urls.py)
SLUG_PATTERN = f"^{SlugConverter.regex}$"


class PublicReadApi(APIView):
    """Base of the read endpoints: anonymous, GET only."""

    authentication_classes: list = []
    permission_classes: list = []
    http_method_names = ["get", "head", "options"]
