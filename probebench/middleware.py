"""Project-wide request checks that belong before any view.

Every refusal here has the API's one error body under ``/api/`` (``{"error": ..., "field": ...}``)
and a plain-text message elsewhere.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpResponse, JsonResponse, UnreadablePostError

from probebench.uploads import UploadTooLarge


def _refusal(request, message: str, *, field: str | None, status: int) -> HttpResponse:
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"error": message, "field": field}, status=status)
    else:
        response = HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    # answered before the rest of the stack (CommonMiddleware sets it there): a client that is
    # still sending its body reads the whole answer without waiting for the connection to close
    response["Content-Length"] = str(len(response.content))
    return response


class RejectNulCharactersMiddleware:
    """400 for a URL path or query string with a NUL (0x00) character in a name or a value.

    No path or parameter of ours accepts one, and PostgreSQL refuses it in any text it is given (a
    lookup or a filter on such a value would fail as a server error). Form and JSON bodies are
    checked by their fields (Django's and DRF's CharField reject NUL characters; JSON metadata by
    ``evaluator.strict_json``).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or "\x00" in request.path_info:
            return _refusal(
                request,
                "the URL path contains a NUL (0x00) character; paths are plain text without control characters",
                field="path",
                status=400,
            )
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in v for v in values):
                shown = name.replace("\x00", "\\x00")
                message = (
                    f"query parameter {shown!r} contains a NUL (0x00) character;"
                    " parameters are plain text without control characters"
                )
                return _refusal(request, message, field=shown, status=400)
        return self.get_response(request)


class RequestLimitsMiddleware:
    """Size and count limits on request bodies, refused with the field they concern.

    - before reading anything: a declared ``Content-Length`` over ``MAX_REQUEST_BYTES`` → 413;
    - while reading: an uploaded file over its limit stops the parse (``probebench.uploads``) → 413;
      form fields over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` → 413; more fields or files than
      ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` / ``DATA_UPLOAD_MAX_NUMBER_FILES`` → 400.

    A form view's body is parsed here, before CSRF (which would parse it anyway), so that these
    refusals are answered instead of surfacing as server errors; an API view (CSRF-exempt) parses
    its body after authentication, and the same refusals reach :meth:`process_exception`.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _refusal(request, "Content-Length must be a number of bytes", field=None, status=400)
        limit = settings.MAX_REQUEST_BYTES
        if declared > limit:
            return _refusal(
                request,
                f"artifact: the request body is {declared:,} bytes; at most {limit:,} bytes are accepted"
                f" (an artifact of at most {settings.MAX_ARTIFACT_BYTES:,} bytes plus its metadata)",
                field="artifact",
                status=413,
            )
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.method not in ("POST", "PUT", "PATCH") or getattr(view_func, "csrf_exempt", False):
            return None
        if request.content_type not in ("multipart/form-data", "application/x-www-form-urlencoded"):
            return None
        try:
            request.POST, request.FILES  # noqa: B018 - parse now, within the limits
        except Exception as exc:  # noqa: BLE001 - only the limit refusals are answered here
            response = self.process_exception(request, exc)
            if response is None:
                raise
            return response
        return None

    def process_exception(self, request, exception):
        if isinstance(exception, UploadTooLarge):
            return _refusal(request, exception.message, field=exception.field, status=413)
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return _refusal(
                request,
                f"metadata: the form fields hold more than {limit:,} bytes; at most {limit:,} are accepted"
                " (send a large probe.json as a file)",
                field="metadata",
                status=413,
            )
        if isinstance(exception, TooManyFieldsSent):
            return _refusal(
                request,
                f"the request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} form fields",
                field=None,
                status=400,
            )
        if isinstance(exception, UnreadablePostError):
            # the body stopped arriving (the web server's idle limit, docker/gunicorn.conf.py) or
            # the client went away: not a server error
            return _refusal(
                request, "the request body stopped arriving before its end", field=None, status=408
            )
        if isinstance(exception, TooManyFilesSent):
            return _refusal(
                request,
                f"the request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files;"
                " a submission is one artifact (and optionally its metadata as a file)",
                field="artifact",
                status=400,
            )
        return None
