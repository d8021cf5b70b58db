"""``?limit=N&offset=M`` on the API's lists (the board, a researcher's submissions), checked.

DRF's ``LimitOffsetPagination`` reads a value it cannot parse as its default and caps a large
limit without a word; here a value that is not a plain integer in range is a 400 naming the
parameter and the accepted range (``{"error": "limit: must be an integer between 1 and 1000",
"field": "limit"}``), and the OpenAPI schema states the same bounds.
"""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
#: beyond any list's length, and within what the database takes as an OFFSET
MAX_OFFSET = 1_000_000_000

_DIGITS = re.compile(r"[0-9]{1,10}")


def _bounded_int(request, name: str, *, lowest: int, highest: int, default: int) -> int:
    """The query parameter ``name`` (each of its values checked, the last one used), or ``default``."""
    values = request.query_params.getlist(name)
    for value in values:
        if not _DIGITS.fullmatch(value) or not lowest <= int(value) <= highest:
            raise serializers.ValidationError({name: [f"must be an integer between {lowest} and {highest}"]})
    return int(values[-1]) if values else default


class ApiPagination(LimitOffsetPagination):
    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT
    max_offset = MAX_OFFSET

    def get_limit(self, request) -> int:
        return _bounded_int(
            request, self.limit_query_param, lowest=1, highest=self.max_limit, default=self.default_limit
        )

    def get_offset(self, request) -> int:
        return _bounded_int(request, self.offset_query_param, lowest=0, highest=self.max_offset, default=0)

    @classmethod
    def schema_parameters(cls) -> list[OpenApiParameter]:
        """``limit`` and ``offset`` with their bounds, for a view that pages by hand."""
        return [
            OpenApiParameter(
                cls.limit_query_param,
                {"type": "integer", "minimum": 1, "maximum": cls.max_limit},
                description=f"rows per page (default {cls.default_limit}, at most {cls.max_limit})",
            ),
            OpenApiParameter(
                cls.offset_query_param,
                {"type": "integer", "minimum": 0, "maximum": cls.max_offset},
                description="rows to skip (default 0)",
            ),
        ]

    def get_schema_operation_parameters(self, view) -> list[dict]:
        """The same parameters where drf-spectacular pages a list view itself."""
        return [
            {
                "name": p.name,
                "required": False,
                "in": "query",
                "description": str(p.description),
                "schema": p.type,
            }
            for p in self.schema_parameters()
        ]
