"""The one place orjson is imported: every JSON encode and decode of the package goes here."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

import orjson

JSONEncodeError = orjson.JSONEncodeError
JSONDecodeError = orjson.JSONDecodeError

# orjson refuses data nested deeper than this many levels.
WRITER_MAX_DEPTH: Final = 254
# The lenient writer stops a little before that, leaving room for the row or event around a value.
LENIENT_MAX_DEPTH: Final = 200
# ``json_ready`` keeps data this deep exactly: call arguments as deep as a provider adapter takes
# them (256) inside a session state, and no deeper than Python can copy and compare it.
READY_MAX_DEPTH: Final = 300
# What stands in for a part cut off for being nested too deep, or for a container inside itself.
MAX_DEPTH_MARKER: Final = "[MaxDepth]"
CIRCULAR_MARKER: Final = "[Circular]"
# What stands in for a value that cannot be turned into text (its ``__str__`` or ``to_dict``
# raises); formatted with the value's type name.
UNPRINTABLE_MARKER: Final = "[Unprintable {}]"
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1
# Half of a UTF-16 pair standing alone: UTF-8 has no spelling for it, and a JSON decoder makes
# one from a model's "\\ud800".
LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# The shortest run of digits that can spell an integer beyond 64 bits.
_WIDE_INTEGER: Final = re.compile(rb"\d{19}")


def dumps(value: Any) -> bytes:
    """Compact JSON bytes; raises ``JSONEncodeError`` for values JSON cannot hold."""
    return orjson.dumps(value)


def dumps_exact(value: Any) -> bytes:
    """``dumps`` for documents whose numbers must be written as they are (exported catalogs):
    orjson refuses an integer beyond 64 bits, so a value holding one is written by Python's
    ``json`` instead, every digit kept. Raises ``ValueError`` for what JSON cannot hold, except
    NaN and the infinities, which orjson writes as ``null`` (callers that must not lose them
    look for them, as the provider payloads do)."""
    try:
        return orjson.dumps(value)
    except JSONEncodeError:
        pass  # not raised from here, so a refusal below does not carry orjson's as context
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as err:  # UnicodeEncodeError: a lone surrogate
        raise ValueError(f"cannot be written as JSON: {err}") from None


def dumps_canonical(value: Any) -> bytes:
    """JSON bytes with sorted keys: equal values give equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def dumps_lenient(value: Any) -> bytes:
    """JSON bytes for display and audit; never raises on odd values.

    Objects JSON cannot hold are written as their ``str`` (see ``text_of``), non-string keys as
    strings, integers beyond 64 bits as strings, cycles as ``"[Circular]"``, nesting past 200
    levels as ``"[MaxDepth]"`` and each lone surrogate in a string (which UTF-8 cannot carry) as
    U+FFFD.
    """
    try:
        return orjson.dumps(value, default=_fallback, option=orjson.OPT_NON_STR_KEYS)
    except (JSONEncodeError, RecursionError, TypeError, ValueError):
        return orjson.dumps(_walk(value, 0, set(), exact=False), default=_fallback)


def json_ready(value: Any) -> Any:
    """``value`` as plain JSON data that reads back as it was written: what ``dumps_lenient``
    makes of it, except that integers beyond 64 bits keep every digit, strings keep their lone
    surrogates and nesting up to ``READY_MAX_DEPTH`` is kept (the stored state of a session,
    whose call arguments must hash the same after a restore). Python's ``json`` writes and reads
    all of these; NaN and the infinities become ``None``, as orjson writes them. Only the parts
    JSON cannot hold at all are written leniently, each where it is: the rest stays exact."""
    try:
        return orjson.loads(orjson.dumps(value, default=_fallback, option=orjson.OPT_NON_STR_KEYS))
    except (JSONEncodeError, RecursionError, TypeError, ValueError):
        pass  # a wide integer, a lone surrogate, deep nesting or an odd key: walked below
    return _walk(value, 0, set(), exact=True)


# Python writes no integer with more digits than this in decimal (``sys.int_info``): ``json_ready``
# writes such an integer as the lenient writer does.
_MAX_DECIMAL_BITS: Final = 14_000


def _walk(value: Any, depth: int, ancestors: set[int], *, exact: bool) -> Any:
    """Plain JSON data for ``value``, one frame a level, cycles and nesting past the limit
    replaced by their markers. ``exact`` (``json_ready``): strings keep lone surrogates, integers
    every digit Python can write, and nesting is kept to ``READY_MAX_DEPTH``; otherwise
    (``dumps_lenient``) as UTF-8 and orjson can hold them, to ``LENIENT_MAX_DEPTH``. Either way
    a value JSON cannot hold is written as ``_fallback`` gives it, where it is.

    Kinds are read from the real type (``type(value)``), never ``isinstance``, which a proxy
    answers through its ``__class__``: a built-in's own slot (``str.__str__``, ``dict.items``)
    is only called on what really is one, so a subclass's overrides never run."""
    kind = type(value)
    if issubclass(kind, str):
        # A subclass by its characters.
        return str.__str__(value) if exact else replace_lone_surrogates(str.__str__(value))
    if value is None or kind is bool:
        return value
    if issubclass(kind, int):
        number = int.__int__(value)
        fits = (
            number.bit_length() <= _MAX_DECIMAL_BITS
            if exact
            else _INT64_MIN <= number <= _UINT64_MAX
        )
        return number if fits else text_of(number)
    if issubclass(kind, float):
        real = float.__float__(value)
        return real if math.isfinite(real) else None
    if depth >= (READY_MAX_DEPTH if exact else LENIENT_MAX_DEPTH):
        return MAX_DEPTH_MARKER
    marker = id(value)
    if marker in ancestors:
        return CIRCULAR_MARKER
    ancestors.add(marker)
    try:
        items = _snapshot(value, kind)
        if items is _NOT_A_CONTAINER:
            try:
                substitute = _fallback(value)
            except RecursionError:
                return MAX_DEPTH_MARKER  # a to_dict() that nests past what Python can follow
            return _walk(substitute, depth + 1, ancestors, exact=exact)
        if issubclass(kind, dict):
            out: dict[str, Any] = {}
            for key, item in items:
                name = _key_text(key) if exact else replace_lone_surrogates(text_of(key))
                out[name] = _walk(item, depth + 1, ancestors, exact=exact)
            return out
        walked: list[Any] = []
        for item in items:
            walked.append(_walk(item, depth + 1, ancestors, exact=exact))  # noqa: PERF401 - a frame a level
        return walked
    finally:
        ancestors.discard(marker)


_NOT_A_CONTAINER: Final[Any] = object()


def _snapshot(value: Any, kind: type) -> Any:
    """A container's items (a dict's pairs) copied by the built-in's own code, so that neither
    a subclass's ``__iter__`` nor a change made while they are walked (a ``to_dict`` that adds to
    them) can fail the walk; ``_NOT_A_CONTAINER`` for anything else."""
    try:
        if issubclass(kind, dict):
            return list(dict.items(value))
        if issubclass(kind, list):
            return list.copy(value)
        if issubclass(kind, tuple):
            return list(tuple.__iter__(value))
        if issubclass(kind, set | frozenset):
            return list(set.__iter__(value) if issubclass(kind, set) else frozenset.__iter__(value))
    except RuntimeError:  # changed while being copied, by another thread
        return [UNPRINTABLE_MARKER.format(kind.__name__)]
    return _NOT_A_CONTAINER


def _key_text(key: Any) -> str:
    """A key as the fast path writes it (orjson's text for a key that is not a string)."""
    if issubclass(type(key), str):
        return str.__str__(key)
    try:
        written = orjson.dumps({key: None}, default=_fallback, option=orjson.OPT_NON_STR_KEYS)
        (text,) = orjson.loads(written)
    except (JSONEncodeError, RecursionError, TypeError, ValueError):
        return text_of(key)
    return str(text)


def fingerprint(value: Any) -> str:
    """JSON text that is equal for values equal as JSON: keys sorted, a number by its value
    (``1.0`` is ``1``, ``-0.0`` is ``0``, an integer with every digit), strings escaped to ASCII
    (lone surrogates included). Raises ``TypeError`` for a value JSON cannot hold and
    ``RecursionError`` when too deep."""
    return json.dumps(_by_value(value), sort_keys=True, separators=(",", ":"))


def _by_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _by_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_by_value(item) for item in value]
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def dumps_for_scan(value: Any) -> bytes:
    """JSON bytes holding every string and key inside ``value`` that the JSON writer would
    write, for a secret scan.

    Unlike ``dumps_lenient`` it never drops anything: a value that cannot be written whole
    (too deep, a cycle, an integer beyond 64 bits) raises, so the caller knows the scan is not
    conclusive. A dataclass's ``_private`` attributes are left out, as the writer leaves them out
    of every event and row (orjson skips them); reading every dataclass through Python instead
    would double the scan of every event and row.
    """
    return orjson.dumps(value, default=_fallback, option=orjson.OPT_NON_STR_KEYS)


def text_of(value: Any) -> str:
    """``str(value)``, but never raising: an integer with more digits than Python will write in
    decimal is written in hex, and a value whose ``__str__`` raises becomes
    ``"[Unprintable <type>]"`` (its error is not shown: it may quote what it could not print)."""
    try:
        return str(value)
    except Exception:
        if isinstance(value, int):
            return hex(value)
        return UNPRINTABLE_MARKER.format(type(value).__name__)


def _fallback(value: Any) -> Any:
    if issubclass(type(value), float):
        # A float subclass (numpy.float64) is a number, not its text: orjson writes floats of
        # the exact type only. (Its real type: a proxy claiming to be a float is not one.)
        return float.__float__(value)
    try:
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict) and not isinstance(value, type):
            return to_dict()
        if isinstance(value, Mapping):
            return dict(value)
        if isinstance(value, set | frozenset | tuple):
            return list(value)
    except RecursionError:
        raise  # too deep through to_dict: the callers cut it with their depth markers
    except Exception:
        return UNPRINTABLE_MARKER.format(type(value).__name__)
    return text_of(value)


def pointer_token(key: object) -> str:
    """``key`` as one token of a JSON Pointer (``~`` and ``/`` escaped)."""
    return str(key).replace("~", "~0").replace("/", "~1")


def _members(value: dict[Any, Any] | list[Any]) -> Iterator[tuple[Any, Any]]:
    return iter(value.items()) if isinstance(value, dict) else enumerate(value)


def json_leaf_paths(value: Any) -> Iterator[tuple[list[Any], Any, bool]]:
    """Every key and every value that is not a dict or list inside plain JSON data, depth first,
    in one generator (any depth): ``(path, leaf, is_key)``, where ``path`` holds the keys and
    positions down to the leaf (to the object holding a key). A pointer is built only when
    asked for: one per leaf would cost the square of a long key's length over the leaves below
    it. ``path`` is the walk's own list, changed as it goes: read it (``pointer_of(path)`` for
    the pointer) before asking for the next leaf, and leave it as it is."""
    path: list[Any] = []
    if not isinstance(value, dict | list):
        yield path, value, False
        return
    stack: list[tuple[Iterator[tuple[Any, Any]], bool]] = [
        (_members(value), isinstance(value, dict))
    ]
    while stack:
        members, is_object = stack[-1]
        for token, item in members:
            if is_object:
                yield path, token, True
            path.append(token)
            if isinstance(item, dict | list):
                stack.append((_members(item), isinstance(item, dict)))
                break
            yield path, item, False
            path.pop()
        else:
            stack.pop()
            if stack:
                path.pop()  # the token of the container just finished


def pointer_of(path: list[Any]) -> str:
    """The JSON Pointer of a ``json_leaf_paths`` path (``""`` for the root)."""
    return "".join(f"/{pointer_token(token)}" for token in path)


def holds_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (``isascii`` answers most text in O(1))."""
    return not text.isascii() and LONE_SURROGATE.search(text) is not None


def replace_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (half of a UTF-16 pair, which UTF-8 cannot carry and a
    JSON decoder makes from ``"\\ud800"``) replaced by U+FFFD; ASCII text is returned as is."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def without_lone_surrogates(value: Any) -> Any:
    """Plain JSON data (dicts, lists, strings, ...) with ``replace_lone_surrogates`` applied to
    every string and key; anything else is kept as it is. For a store whose strict writer
    refused a value only because a string held a lone surrogate."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {
            replace_lone_surrogates(key) if isinstance(key, str) else key: without_lone_surrogates(
                item
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [without_lone_surrogates(item) for item in value]
    return value


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def loads_exact(data: bytes) -> Any:
    """``loads`` for documents whose numbers must survive as written (tool catalogs): orjson
    reads an integer beyond 64 bits as the nearest float, so text that may hold one (a run of
    19 digits) is read again by Python's ``json``, which keeps every digit. The text is
    orjson's to accept or refuse, so both readers give the same errors."""
    value = orjson.loads(data)
    if _WIDE_INTEGER.search(data) is None:
        return value
    try:
        return json.loads(data)
    except RecursionError:
        pass  # raised below, so the error does not keep the deep traceback as its context
    # Deeper than Python's reader goes: refused, never handed over with its digits rounded.
    raise JSONDecodeError("nested too deeply to read its wide integers exactly", "", 0)


def loads_stored(text: bytes | str) -> Any:
    """Python's ``json`` reading of stored text (it takes all that ``json.dumps`` writes, NaN and
    lone surrogate escapes included); text nested too deep for it is a ``ValueError``, not a
    ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        pass  # raised below, so the error does not keep the deep traceback as its context
    raise ValueError("the JSON text nests too deeply to be read")
