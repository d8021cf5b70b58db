"""The API's JSON parser: DRF's, with the limits of :mod:`evaluator.strict_json` applied before
parsing (size, nesting depth) and no NaN/Infinity or NUL characters. A body outside them is a 400
naming what is accepted (DRF's own parser recursed until Python's limit: a server error)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from evaluator.strict_json import JsonRejected, json_loads_strict

#: An API request body is a small object; nothing we accept nests deeper.
MAX_BODY_DEPTH = 8


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        try:
            return json_loads_strict(raw, max_bytes=limit, max_depth=MAX_BODY_DEPTH)
        except JsonRejected as exc:
            raise ParseError(f"JSON body refused: {exc}") from None
