"""JSON from untrusted sources (submission metadata, recipes, safetensors headers), parsed with
limits that hold *before* the parser recurses or allocates.

- size: the text is refused above ``max_bytes`` before it is parsed;
- depth: nesting is measured by a few vectorised passes over the bytes (no pattern that could
  backtrack), so a 100 000-deep ``[[[[…`` is refused with a message instead of exhausting the
  recursion limit, and no text (an unterminated string of escaped quotes, a run of backslashes)
  costs more than linear time;
- text: a string holding NUL (``\\u0000``, which PostgreSQL refuses) or an unpaired surrogate
  (not encodable as UTF-8) is refused;
- numbers: ``NaN``, ``Infinity`` and ``-Infinity`` are refused, a float that overflows to ±inf
  (``1e999``) is refused, and an integer literal longer than 40 digits is refused (Python would
  otherwise spend quadratic time on it, or raise past 4300 digits).

Every refusal is a :class:`JsonRejected` (a ValueError) whose message says what is accepted.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

#: Nesting deeper than this is refused (probe.json and recipes need 3: object → object → list).
MAX_DEPTH = 16
MAX_INT_DIGITS = 40


class JsonRejected(ValueError):
    """The text is not JSON we accept; the message says why and what is accepted."""


def _depth(raw: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in ``raw`` (JSON text), brackets inside strings ignored.

    Linear time, in numpy: a quote is escaped when an odd run of backslashes precedes it; the
    other quotes open and close strings, so a byte is inside a string when an odd number of them
    come before it; the depth is the running sum of the brackets outside strings. Exact for every
    prefix of ``raw`` that is valid JSON, which is all the parser reads before it refuses a text.
    """
    codes = np.frombuffer(raw, dtype=np.uint8)
    n = codes.size
    if n == 0:
        return 0
    position = np.arange(n, dtype=np.int64 if n >= 2**31 else np.int32)
    # the last byte at or before each position that is not a backslash (-1: none)
    last_other = np.maximum.accumulate(np.where(codes == ord("\\"), -1, position))
    quotes = np.flatnonzero(codes == ord('"'))
    previous = np.where(quotes > 0, last_other[quotes - 1], -1)
    backslashes_before = quotes - 1 - previous
    string_quotes = quotes[backslashes_before % 2 == 0]
    toggles = np.zeros(n + 1, dtype=np.uint8)
    toggles[string_quotes + 1] = 1
    # parity survives the uint8 sum wrapping around
    inside = (np.cumsum(toggles[:n], dtype=np.uint8) & 1).astype(bool)
    steps = np.zeros(n, dtype=position.dtype)
    steps[(codes == ord("[")) | (codes == ord("{"))] = 1
    steps[(codes == ord("]")) | (codes == ord("}"))] = -1
    steps[inside] = 0
    return int(np.cumsum(steps).max(initial=0))


def _reject_constant(name: str):
    raise JsonRejected(f"{name} is not a number JSON accepts; use a finite number or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected(f"the number {text[:40]} is out of range (it overflows to infinity)")
    return value


def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise JsonRejected(f"an integer of {len(digits)} digits is out of range (at most {MAX_INT_DIGITS})")
    return int(text)


def json_loads_strict(text: str | bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``text`` as JSON within the limits above, or raise JsonRejected."""
    raw = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else bytes(text)
    if len(raw) > max_bytes:
        raise JsonRejected(f"it is {len(raw):,} bytes; at most {max_bytes:,} bytes are accepted")
    depth = _depth(raw)
    if depth > max_depth:
        raise JsonRejected(f"it is nested {depth} levels deep; at most {max_depth} levels are accepted")
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonRejected(f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(
            decoded, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int
        )
    except json.JSONDecodeError as exc:
        raise JsonRejected(f"not valid JSON ({exc})") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise JsonRejected(f"it is nested too deeply; at most {max_depth} levels are accepted") from None
    _strings_check(value)
    return value


def _strings_check(value: Any) -> None:
    """Refuse NUL characters and unpaired surrogates in every key and string of ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                raise JsonRejected(
                    "a text holds a NUL (\\u0000) character; text without control characters is accepted"
                )
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise JsonRejected(
                    "a text holds an unpaired surrogate (\\ud800-\\udfff); it is not valid UTF-8"
                ) from None
