"""One error body for every ``/api/v1`` endpoint, from one DRF exception handler
(``REST_FRAMEWORK["EXCEPTION_HANDLER"]``)::

    {"error": "<a message for a person>", "field": "<the input field at fault, or null>"}

Views do not catch errors: input serializers raise ``ValidationError`` (the first field at fault is
reported), services raise ``ServiceError`` subclasses, selectors and the query parsers
(leaderboard.inputs) ``QueryError`` (answered as DRF's 400 for the parameter, or its 404), which carry their status code
(``ValidationFailed`` 400, ``DuplicateArtifact`` and ``Conflict`` 409, ``ArtifactTooLarge`` 413,
``QueueFull`` 429 with ``Retry-After``) and may add keys of their own (a duplicate names
``existing_probe`` and ``existing_url``, a full queue ``retry_after_s``). Everything
DRF raises (401, 403, 404, 405, 415, 429) gets the same two keys, keeping DRF's status code and
headers (``WWW-Authenticate``, ``Retry-After``).
"""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from leaderboard.errors import QueryError, ServiceError

#: The error body in the OpenAPI schema (component "Error").
ErrorSerializer = inline_serializer(
    "Error",
    fields={
        "error": serializers.CharField(help_text="what went wrong, for a person to read"),
        "field": serializers.CharField(allow_null=True, help_text="the input field at fault, or null"),
    },
)


def error_body(message: str, field: str | None = None, extra: dict | None = None) -> dict[str, Any]:
    return {"error": message, "field": field, **(extra or {})}


def _first_error(detail: Any) -> tuple[str, str | None]:
    """The first message of a ValidationError's detail and the (dotted) field it belongs to."""
    if isinstance(detail, dict):
        if not detail:
            return "invalid input", None
        name, value = next(iter(detail.items()))
        message, inner = _first_error(value)
        if name == api_settings.NON_FIELD_ERRORS_KEY:
            return message, inner
        return message, f"{name}.{inner}" if inner else str(name)
    if isinstance(detail, list):
        return _first_error(detail[0]) if detail else ("invalid input", None)
    return str(detail), None


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler, then the body rewritten to ``{"error", "field"}``; None (a 500) for an
    exception that is not an API error."""
    if isinstance(exc, QueryError):  # a read's query: answered as DRF answers its own 400 and 404
        exc = (
            exceptions.NotFound(exc.message)
            if exc.status_code == 404
            else exceptions.ValidationError({exc.param: [exc.message]})
        )
    if isinstance(exc, ServiceError):
        return Response(
            error_body(exc.message, exc.field, exc.extra), status=exc.status_code, headers=exc.headers
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        message, field = _first_error(exc.detail)
        if field and field.split(".")[0] not in message:
            message = f"{field}: {message}"
    else:
        data = response.data
        message = str(data.get("detail", data)) if isinstance(data, dict) else str(data)
        field = None
    response.data = error_body(message, field)
    return response


def api_not_found(request) -> JsonResponse:
    """The 404 of a path under /api/ that no endpoint answers, whatever its method (the URL
    conf's ``handler404``; pages keep their HTML 404)."""
    message = (
        f"no API endpoint answers {request.method} {request.path}; the endpoints are listed at /api/docs/"
    )
    return JsonResponse(error_body(message), status=404)


#: The error statuses an operation may document, and what each means.
ERROR_STATUSES = {
    400: "bad input: the parameter or field at fault is named",
    401: "no or invalid credentials (`Authorization: Token <key>`)",
    403: "not allowed: a maintainer's action, or a session without its CSRF token",
    404: "no such resource",
    406: "no representation matches the Accept header",
    408: "the request body stopped arriving before its end",
    413: "the request body is over its size limit",
    415: "unsupported Content-Type",
    429: "too many requests: retry after `Retry-After` seconds",
}
RETRY_AFTER = {"schema": {"type": "integer"}, "description": "seconds to wait before retrying"}


class ApiSchema(AutoSchema):
    """The OpenAPI schema of the API's views (``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]``): every
    /api/v1 operation lists each error status its view can answer, with the one error body.

    Every request may get a 400 (a NUL character in its query, probebench/middleware.py) and a 406
    (content negotiation); a path parameter that names nothing, a 404; a view that authenticates,
    401, and 403 where it needs more than a signed-in user or takes a body (a session's CSRF
    check); a request body, 408, 413 (probebench/middleware.py) and 415; a throttled view, 429.
    Codes a view declares itself (409, the 404 of a query parameter) are kept as declared.
    """

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None or not path.startswith("/api/v1/"):
            return operation
        responses = operation.setdefault("responses", {})
        for code in sorted(self._error_statuses(operation)):
            responses.setdefault(str(code), {"description": ERROR_STATUSES[code]})
        if "429" in responses:
            responses["429"].setdefault("headers", {"Retry-After": RETRY_AFTER})
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _error_statuses(self, operation: dict) -> set[int]:
        view = self.view
        codes = {400, 406}
        if any(p["in"] == "path" for p in operation.get("parameters", [])):
            codes.add(404)
        has_body = "requestBody" in operation
        if view.get_authenticators():
            codes.add(401)
            stricter = any(
                not (isinstance(p, type) and issubclass(p, (AllowAny, IsAuthenticated)))
                for p in view.permission_classes
            )
            if stricter or has_body:
                codes.add(403)
        if has_body:
            codes |= {408, 413, 415}
        if view.get_throttles():
            codes.add(429)
        return codes


def schema_error_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: every /api/v1 operation documents its 4XX answers
    with the one error body (operations that name their 4xx codes keep them)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault(
        "Error",
        {
            "type": "object",
            "properties": {
                "error": {"type": "string", "description": "what went wrong, for a person to read"},
                "field": {"type": "string", "nullable": True, "description": "the input field at fault"},
            },
            "required": ["error", "field"],
        },
    )
    body = {
        "description": 'every error: {"error": "<message>", "field": "<field or null>"}',
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/"):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for code, response in responses.items():
                if str(code).startswith("4") and "content" not in response:
                    response["content"] = body["content"]
            responses.setdefault("4XX", body)
    return result
