"""The one place orjson is imported: every JSON encode and decode of the package goes here."""

from __future__ import annotations

from typing import Any

import orjson

JSONEncodeError = orjson.JSONEncodeError
JSONDecodeError = orjson.JSONDecodeError


def dumps(value: Any) -> bytes:
    """Compact JSON bytes; raises ``JSONEncodeError`` for values JSON cannot hold."""
    return orjson.dumps(value)


def dumps_canonical(value: Any) -> bytes:
    """JSON bytes with sorted keys: equal values give equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def dumps_lenient(value: Any) -> bytes:
    """JSON bytes for display and audit: objects JSON cannot hold are written as their ``str``,
    non-string keys as strings."""
    return orjson.dumps(value, default=_fallback, option=orjson.OPT_NON_STR_KEYS)


def _fallback(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)
