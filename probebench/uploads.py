"""Upload limits that hold while the body streams in, not after it is on disk.

``SizeLimitUploadHandler`` is the first of ``FILE_UPLOAD_HANDLERS``: it counts the bytes of each
uploaded file as Django's multipart parser hands them over (64 KB chunks) and stops the parse as
soon as a file passes its limit: ``MAX_ARTIFACT_BYTES`` for the ``artifact`` field,
``MAX_METADATA_BYTES`` for any other file (a probe.json or recipe sent as a file). The request
then gets a 413 naming the field (``probebench.middleware.RequestLimitsMiddleware``).

Stopping the parse with an exception skips Django's own clean-up (it tells the handlers an upload
was interrupted only when the parse ends normally), so the handler does it before it raises: every
handler of the request hears ``upload_interrupted()``, and the temporary-file handler deletes the
partial file it was spooling to; the files of the request that were completed and spooled before
it are closed, which deletes them.
"""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile
from django.core.files.uploadhandler import FileUploadHandler

from leaderboard.errors import ArtifactTooLarge

ARTIFACT_FIELD = "artifact"


def upload_limit_for(field_name: str) -> int:
    """The most bytes a file uploaded under ``field_name`` may hold."""
    return settings.MAX_ARTIFACT_BYTES if field_name == ARTIFACT_FIELD else settings.MAX_METADATA_BYTES


def _size_text(n: int) -> str:
    return f"{n} bytes ({n / (1024 * 1024):g} MB)" if n >= 1024 * 1024 else f"{n} bytes"


class UploadTooLarge(ArtifactTooLarge):
    """A file of the request passed its limit while being received (413, field named)."""

    def __init__(self, *, field_name: str, limit: int):
        what = "artifact" if field_name == ARTIFACT_FIELD else f"file {field_name!r}"
        super().__init__(
            f"{field_name}: the {what} is over the size limit; the limit is {_size_text(limit)}"
            " (the upload was stopped there)",
            field=field_name,
        )


class SizeLimitUploadHandler(FileUploadHandler):
    """Stops the upload of a file as soon as its running size passes its field's limit."""

    def __init__(self, request=None):
        super().__init__(request)
        self.completed: list[TemporaryUploadedFile] = []  # this request's files spooled to disk

    def new_file(self, field_name, *args, **kwargs):
        # called before the next handlers' new_file: what they hold now is the previous, completed file
        self.completed += [
            file
            for handler in self._others()
            if isinstance(file := getattr(handler, "file", None), TemporaryUploadedFile)
        ]
        super().new_file(field_name, *args, **kwargs)
        self.limit = upload_limit_for(field_name)
        self.received = 0

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.limit:
            self._interrupt_all()
            raise UploadTooLarge(field_name=self.field_name, limit=self.limit)
        return raw_data  # the next handler (memory or temporary file) stores it

    def file_complete(self, file_size):
        return None

    def _others(self) -> list[FileUploadHandler]:
        handlers = self.request.upload_handlers if self.request is not None else []
        return [handler for handler in handlers if handler is not self]

    def _interrupt_all(self) -> None:
        """What Django does for a parse cut short (each handler discards the file it was
        receiving), and the spooled files completed before it closed (a temporary file is deleted
        when it is closed)."""
        for handler in self._others():
            handler.upload_interrupted()
        for spooled in self.completed:
            spooled.close()
