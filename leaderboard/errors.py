"""Errors the leaderboard services raise. Views and API map them to status codes."""


class ServiceError(Exception):
    """A request that cannot be carried out; the message is safe to show to the user."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None, extra: dict | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.extra = extra or {}


class ValidationFailed(ServiceError):
    status_code = 400


class DuplicateArtifact(ServiceError):
    status_code = 409


class ArtifactTooLarge(ServiceError):
    status_code = 413


class Conflict(ServiceError):
    status_code = 409


class InfrastructureFault(Exception):
    """Raised by an evaluation run to the Celery task so that it retries with backoff."""


class ImmutableRecordError(Exception):
    """A confirmed leakage record was about to be changed or deleted."""
