"""DRF's throttles (the API's and, through ``probebench.security.form_throttled``, the web forms'),
counted once across all the site's processes.

A throttle reads a client's history from the cache, checks it and writes it back. The cache is
shared by every process (``CACHES`` in settings), so no process counts alone; in the embedded mode
(files under the data directory) the read-check-write also holds an exclusive lock on
``THROTTLE_LOCK_FILE``, so two requests served at once by two processes cannot both take the last
place. With Redis (``THROTTLE_LOCK_FILE`` unset) DRF's own counting is used as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator

from django.conf import settings
from rest_framework import throttling


@contextlib.contextmanager
def _counting_lock() -> Iterator[None]:
    path = getattr(settings, "THROTTLE_LOCK_FILE", None)
    if not path:
        yield
        return
    with open(path, "ab") as handle:  # a new open file description per call: threads exclude too
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _Counted:
    def allow_request(self, request, view) -> bool:
        with _counting_lock():
            return super().allow_request(request, view)  # type: ignore[misc]


class AnonRateThrottle(_Counted, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_Counted, throttling.UserRateThrottle):
    pass


class ScopedRateThrottle(_Counted, throttling.ScopedRateThrottle):
    pass
