"""Errors the leaderboard services and selectors raise. Each carries its status code: the API's one
exception handler (leaderboard/api/errors.py) and the pages' ``query_errors`` decorator
(leaderboard/web/views.py) answer them, no view maps one by hand."""


class ServiceError(Exception):
    """A request that cannot be carried out; the message is safe to show to the user."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None, extra: dict | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.extra = extra or {}
        #: HTTP headers the answer carries (``Retry-After``)
        self.headers: dict[str, str] = {}


class ValidationFailed(ServiceError):
    status_code = 400


class DuplicateArtifact(ServiceError):
    status_code = 409


class ArtifactTooLarge(ServiceError):
    status_code = 413


class Conflict(ServiceError):
    status_code = 409


class QueueFull(ServiceError):
    """The account's queued work would go over its cap (``PROBEBENCH_MAX_QUEUED_RUN_SECONDS``):
    429, with ``Retry-After`` the estimated wait in seconds."""

    status_code = 429

    def __init__(self, message: str, *, field: str | None, retry_after_s: int, extra: dict | None = None):
        super().__init__(message, field=field, extra={**(extra or {}), "retry_after_s": retry_after_s})
        self.headers = {"Retry-After": str(retry_after_s)}


class ServiceUnavailable(ServiceError):
    """A service the write needs (the task broker) cannot be reached: 503, and nothing was stored."""

    status_code = 503


class QueryError(ServiceError):
    """A read request (query parameters, a weights spec, a probe) that names something that does
    not exist or is malformed; ``param`` is the parameter at fault. Selectors raise it."""

    def __init__(self, message: str, *, param: str, status: int = 400):
        super().__init__(message, field=param)
        self.status_code = status

    @property
    def param(self) -> str:
        return self.field or ""


class InfrastructureFault(Exception):
    """Raised by an evaluation run to the Celery task so that it retries with backoff; ``run_id``
    is the run that faulted (the one the retry is for)."""

    def __init__(self, message: str = "", *, run_id: int | None = None):
        super().__init__(message)
        self.run_id = run_id


class ImmutableRecordError(Exception):
    """A confirmed leakage record was about to be changed or deleted."""
