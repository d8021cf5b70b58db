"""The query parameters of the public reads, parsed by input serializers: one parser per family of
requests, shared by the pages (leaderboard.web.views) and the read API (leaderboard.api.read,
leaderboard.api.compare).

``query_parse`` raises ``errors.QueryError`` naming the first parameter at fault (in field order),
which the API's exception handler answers as a 400 with ``{"error", "field"}`` and the pages'
``query_errors`` decorator as the 400 error page (or a 404, where a page says so). Values are
read as the browser sent them: each field strips what it strips itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rest_framework import serializers

from leaderboard.errors import QueryError
from leaderboard.selectors.board.query import BOARD_STATUSES, BoardQuery
from leaderboard.selectors.board.sorting import sort_keys
from leaderboard.selectors.reliability import flagged_sort


def _text(**kwargs) -> serializers.CharField:
    return serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, **kwargs)


def _stripped(value: str | None) -> str | None:
    return (value or "").strip() or None


#: the largest version number a query may name (the database's integer)
MAX_VERSION = 2**31 - 1
_DIGITS = re.compile(r"[0-9]{1,10}")  # ASCII digits only: str.isdigit() takes "²", which int() refuses

_FALSE = (None, "", "0", "false", "False", "off", "no")
_TRUE = ("1", "true", "True", "on", "yes")


class BoardQueryInput(serializers.Serializer):
    """The board's query string (the category page, the leaderboard API and the exports).
    ``context["category"]``: the category named by the URL, which the query string cannot change."""

    # the order the errors are reported in: the first field at fault wins
    sort = _text()
    dir = _text()
    status = _text()
    measured_only = _text()
    category = _text()
    spec = _text()
    compare = _text()
    model = _text()
    license = _text()
    q = _text()

    def validate_sort(self, value: str) -> str:
        sort = (value or "score").strip()
        keys = sort_keys()
        if sort not in keys:
            raise serializers.ValidationError(f"unknown sort key {sort!r}; accepted: {', '.join(keys)}")
        metric = flagged_sort(sort)
        if metric is not None:
            accepted = ", ".join(k for k in keys if flagged_sort(k) is None)
            raise serializers.ValidationError(
                f"sort key {sort!r} is off: the reliability diagnostics flag {metric} (see the methodology"
                f" page); accepted: {accepted}"
            )
        return sort

    def validate_dir(self, value: str) -> str:
        direction = (value or "").strip()
        if direction not in ("", "asc", "desc"):
            raise serializers.ValidationError("dir must be asc or desc")
        return direction

    def validate_status(self, value: str) -> str | None:
        status = _stripped(value)
        if status is not None and status not in BOARD_STATUSES:
            raise serializers.ValidationError(f"status must be one of {', '.join(BOARD_STATUSES)}")
        return status

    def validate_measured_only(self, value: str) -> bool:
        if value in _FALSE:
            return False
        if value in _TRUE:
            return True
        raise serializers.ValidationError(f"measured_only must be true or false, got {value!r}")

    def query(self) -> BoardQuery:
        data = self.validated_data
        category = self.context.get("category")
        return BoardQuery(
            category=category if category is not None else _stripped(data.get("category")),
            spec=_stripped(data.get("spec")),
            compare=_stripped(data.get("compare")),
            model=_stripped(data.get("model")),
            license=_stripped(data.get("license")),
            status=data.get("status"),
            measured_only=data.get("measured_only", False),
            q=(data.get("q") or "").strip()[:100],
            sort=data.get("sort", "score"),
            direction=data.get("dir", ""),
        )


class ProbeQueryInput(serializers.Serializer):
    """``?spec=VERSION&version=N`` on the probe page and the probe API."""

    spec = _text()
    version = _text()

    def validate_version(self, value: str) -> int | None:
        if not _DIGITS.fullmatch(value) or int(value) > MAX_VERSION:
            raise serializers.ValidationError(f"must be a positive integer (at most {MAX_VERSION})")
        return int(value)  # 0 names no version: not found

    def validate_spec(self, value: str) -> str | None:
        return value or None


class CompareQueryInput(serializers.Serializer):
    """``?a=SLUG&b=SLUG[&spec=VERSION]``: the probes are checked by the comparison itself."""

    a = _text()
    b = _text()
    spec = _text()

    def validate_spec(self, value: str) -> str | None:
        return value or None


class TaskListInput(serializers.Serializer):
    """``?category=SLUG`` on the task list API."""

    category = _text()

    def validate_category(self, value: str) -> str | None:
        return _stripped(value)


def query_parse(serializer_class: type[serializers.Serializer], params: Mapping, **context) -> dict:
    """``params`` checked by ``serializer_class``: its validated data (the serializer itself under
    ``"input"``), or ``QueryError`` naming the first parameter at fault."""
    found = serializer_class(data=params, context=context)
    if not found.is_valid():
        param, messages = next(iter(found.errors.items()))
        raise QueryError(str(messages[0]), param=param)
    return dict(found.validated_data) | {"input": found}


def board_query(params: Mapping, *, category: str | None = None) -> BoardQuery:
    """The board's query from a query string (see :class:`BoardQueryInput`)."""
    return query_parse(BoardQueryInput, params, category=category)["input"].query()
