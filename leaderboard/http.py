"""What the pages (leaderboard.web) and the API (leaderboard.api) share over HTTP: the public-cache
decorator. Neither package imports the other; both import this."""

from __future__ import annotations

from functools import wraps

from django.utils.cache import patch_cache_control
from django.utils.decorators import method_decorator
from django.views.decorators.http import conditional_page, require_safe
from rest_framework.views import APIView

from leaderboard.policy import PUBLIC_MAX_AGE_S


def public_cache(view=None, *, max_age: int = PUBLIC_MAX_AGE_S, immutable: bool = False, etag: bool = True):
    """``Cache-Control: public, max-age=…`` and, with ``etag``, an ETag with 304 answers to a
    matching ``If-None-Match`` (``conditional_page``), on a public read.

    On a page (a function view): GET and HEAD only, the cache header on its 200 answers (an error
    page is not cached). On a read API view (an ``APIView`` class): on every answer of its
    ``dispatch``, DRF's error bodies included (they are as public as the data). ``immutable``: the
    response never changes under its URL (an artifact named by its version)."""

    def decorate(view):
        cache = {"public": True, "max_age": max_age} | ({"immutable": True} if immutable else {})
        if isinstance(view, type) and issubclass(view, APIView):  # a DRF view class
            dispatch = view.dispatch
            if etag:
                dispatch = method_decorator(conditional_page)(dispatch)

            @wraps(dispatch)
            def cached_dispatch(self, request, *args, **kwargs):
                response = dispatch(self, request, *args, **kwargs)
                patch_cache_control(response, **cache)
                return response

            view.dispatch = cached_dispatch  # type: ignore[method-assign]  # wrapping the class's own method
            return view

        @wraps(view)
        def wrapped(request, *args, **kwargs):
            response = view(request, *args, **kwargs)
            if response.status_code == 200:
                patch_cache_control(response, **cache)
            return response

        return require_safe(conditional_page(wrapped) if etag else wrapped)

    return decorate(view) if view is not None else decorate
