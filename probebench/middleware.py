"""Project-wide request checks that belong before any view."""

from __future__ import annotations

from django.http import HttpResponseBadRequest, JsonResponse


class RejectNulCharactersMiddleware:
    """400 for a query string with a NUL (0x00) character in a name or a value.

    No parameter of ours accepts one, and PostgreSQL refuses it in any text it is given (a filter
    on such a value would fail as a server error). Form and JSON bodies are checked by their
    fields (Django's and DRF's CharField reject NUL characters).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in v for v in values):
                shown = name.replace("\x00", "\\x00")
                message = (
                    f"query parameter {shown!r} contains a NUL (0x00) character;"
                    " parameters are plain text without control characters"
                )
                if request.path.startswith("/api/"):
                    return JsonResponse({shown: [message]}, status=400)
                return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
