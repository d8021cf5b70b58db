"""Who the client is, and the API's throttles applied to the web forms.

One client identity everywhere: DRF's throttles, the form throttles below and the login lockout
(django-axes, ``AXES_CLIENT_IP_CALLABLE``) all read it from DRF's ``get_ident``, which trusts
``X-Forwarded-For`` only as far as ``REST_FRAMEWORK["NUM_PROXIES"]`` declared proxies
(``PROBEBENCH_NUM_PROXIES``, default 0: the socket's address, whatever the client sends).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import wraps
from typing import Protocol

from django.http import HttpRequest
from django.template.response import TemplateResponse
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from probebench.throttling import CountsUnavailable


class _Throttle(Protocol):
    """What the form throttles use of a DRF throttle: it reads the request's META and user, which
    a Django request has as well as a DRF one."""

    def allow_request(self, request: HttpRequest, view: object) -> bool: ...
    def wait(self) -> float | None: ...


def client_ip_get(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or the address the declared proxies saw."""
    # the stub asks for a DRF Request; get_ident reads only request.META, which a Django request has
    return BaseThrottle().get_ident(request)  # type: ignore[arg-type]


def form_throttled(*, scope: str | None = None, methods: tuple[str, ...] = ("POST",)):
    """Apply the API's throttle classes (``DEFAULT_THROTTLE_CLASSES`` with their rates, and the
    scoped rate ``scope``) to a Django view, for the given methods. The cache keys are the API's:
    a researcher's submissions through the form and through the API share one "submissions" budget.
    Over the limit: 429 with Retry-After, the form is not processed; when the counts cannot be
    reached, 503 (``probebench.throttling``), the form is not processed either."""

    view_attrs = type("ThrottledFormView", (), {"throttle_scope": scope})()

    def decorator(view):
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs):
            if request.method in methods:
                waits: list[float] = []
                # DRF resolves the setting's import strings to classes; the stub types the strings
                throttle_classes: Sequence[type[_Throttle]] = api_settings.DEFAULT_THROTTLE_CLASSES  # type: ignore[assignment]
                try:
                    for throttle_class in throttle_classes:
                        throttle = throttle_class()
                        if not throttle.allow_request(request, view_attrs):
                            waits.append(throttle.wait() or 0)
                except CountsUnavailable as exc:
                    context = {"message": str(exc.detail)}
                    return TemplateResponse(request, "leaderboard/unavailable.html", context, status=503)
                if waits:
                    retry_after = max(1, math.ceil(max(waits)))
                    response = TemplateResponse(
                        request, "leaderboard/throttled.html", {"retry_after": retry_after}, status=429
                    )
                    response["Retry-After"] = str(retry_after)
                    return response
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
