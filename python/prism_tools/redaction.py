"""Secret redaction over nested values.

``create_secret_redactor(secrets)`` compiles every secret into one Aho-Corasick automaton in the
Rust core. ``redact(value)`` first serializes the whole value once and asks the automaton whether
any secret occurs anywhere (raw or JSON-escaped); when none does, the value comes back as the same
object, untouched, which is the common case and costs one ``orjson.dumps``. Only when a secret is
present does it walk the value, rebuilding just the containers on the path to a secret: strings,
dict keys and values, lists, tuples, sets and dataclass fields. The input is never mutated.

Bounds: below ``max_depth`` (32) levels a subtree that still holds a secret becomes
``"[MaxDepth]"`` (one without a secret is kept as is); a container that contains itself becomes
``"[Circular]"``; an object the walk cannot open whose ``str()`` holds a secret is replaced by
that string, redacted, so a secret never leaves inside an opaque object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from prism_tools import _json
from prism_tools._core import SecretMatcher
from prism_tools.types import ToolCallRecord

T = TypeVar("T")

DEFAULT_REPLACEMENT = "[REDACTED]"
DEFAULT_MAX_DEPTH = 32
MAX_DEPTH_CEILING = 256
MAX_DEPTH_MARKER = _json.MAX_DEPTH_MARKER
CIRCULAR_MARKER = _json.CIRCULAR_MARKER


class Redactor(Protocol):
    """Anything that can scrub a value: ``redact(value)`` returns a copy without secrets."""

    def redact(self, value: T) -> T: ...


def _secret_tuple(secrets: Iterable[str]) -> tuple[str, ...]:
    if isinstance(secrets, str):
        raise TypeError("secrets must be a collection of strings, not a single string")
    try:
        return tuple(secrets)
    except TypeError:
        raise TypeError(
            f"secrets must be a collection of strings, got {type(secrets).__name__}"
        ) from None


class SecretRedactor:
    """Replaces every occurrence of the given secrets inside nested values."""

    __slots__ = ("_matcher", "max_depth")

    def __init__(
        self,
        secrets: Iterable[str],
        *,
        replacement: str = DEFAULT_REPLACEMENT,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        if (
            not isinstance(max_depth, int)
            or isinstance(max_depth, bool)
            or not (1 <= max_depth <= MAX_DEPTH_CEILING)
        ):
            raise ValueError(f"max_depth must be an integer from 1 to {MAX_DEPTH_CEILING}")
        if not isinstance(replacement, str):
            raise TypeError("replacement must be a string")
        self._matcher = SecretMatcher(_secret_tuple(secrets), replacement=replacement)
        self.max_depth = max_depth

    def __len__(self) -> int:
        """Number of distinct non-empty secrets."""
        return len(self._matcher)

    def __repr__(self) -> str:
        # Never show the secrets themselves.
        return f"SecretRedactor(<{len(self._matcher)} secrets>)"

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        replaced = self._matcher.replace(text)
        return text if replaced is None else replaced

    def contains_secret(self, value: Any) -> bool:
        """Whether any secret occurs anywhere in ``value`` (strings, keys, nested data)."""
        if not len(self._matcher):
            return False
        if isinstance(value, str):
            return self._matcher.contains(value)
        try:
            blob = _json.dumps_for_scan(value)
        except Exception:
            return True  # too deep, too odd or cyclic to serialize: let the walk decide
        return self._matcher.contains_json(blob)

    def redact(self, value: T) -> T:
        """A copy of ``value`` with every secret replaced; the same object if none occurs."""
        if not self.contains_secret(value):
            return value
        return self._walk(value, 0, set())  # type: ignore[no-any-return]

    def _walk(self, value: Any, depth: int, ancestors: set[int]) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if value is None or isinstance(value, bool | int | float):
            return value
        if depth >= self.max_depth:
            return MAX_DEPTH_MARKER if self.contains_secret(value) else value
        marker = id(value)
        if marker in ancestors:
            return CIRCULAR_MARKER
        ancestors.add(marker)
        try:
            return self._walk_container(value, depth + 1, ancestors)
        finally:
            ancestors.discard(marker)

    def _walk_container(self, value: Any, depth: int, ancestors: set[int]) -> Any:
        if isinstance(value, Mapping):
            return self._walk_mapping(value, depth, ancestors)
        if isinstance(value, list):
            items = [self._walk(item, depth, ancestors) for item in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if type(value) is tuple:
            items = [self._walk(item, depth, ancestors) for item in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else tuple(items)
        if isinstance(value, set | frozenset):
            return type(value)(self._walk(item, depth, ancestors) for item in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._walk_dataclass(value, depth, ancestors)
        return self._walk_opaque(value)

    def _walk_mapping(self, value: Mapping[Any, Any], depth: int, ancestors: set[int]) -> Any:
        out: dict[Any, Any] = {}
        changed = not isinstance(value, dict)
        for key, item in value.items():
            if isinstance(key, str):
                new_key = self.redact_text(key)
            elif self._matcher.contains(_json.text_of(key)):
                # A key that is not a string but spells a secret leaves as redacted text.
                new_key = self.redact_text(_json.text_of(key))
            else:
                new_key = key
            if new_key in out:
                # Two keys that redact to the same text must both survive.
                suffix = 2
                while f"{new_key}__{suffix}" in out:
                    suffix += 1
                new_key = f"{new_key}__{suffix}"
            new_item = self._walk(item, depth, ancestors)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value

    def _walk_dataclass(self, value: Any, depth: int, ancestors: set[int]) -> Any:
        changes: dict[str, Any] = {}
        later: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name, None)
            new_item = self._walk(item, depth, ancestors)
            if new_item is not item:
                (changes if field.init else later)[field.name] = new_item
        if not changes and not later:
            return value
        copy = dataclasses.replace(value, **changes)
        for name, item in later.items():
            # Fields outside __init__ cannot go through replace(); write them on the copy
            # (object.__setattr__ works for frozen dataclasses too).
            object.__setattr__(copy, name, item)
        return copy

    def _walk_opaque(self, value: Any) -> Any:
        try:
            text = str(value)
        except Exception:
            return value
        return self.redact_text(text) if self._matcher.contains(text) else value


@dataclasses.dataclass(frozen=True, slots=True)
class ChainedRedactor:
    """Applies several redactors in order."""

    redactors: tuple[Redactor, ...]

    def redact(self, value: T) -> T:
        for redactor in self.redactors:
            value = redactor.redact(value)
        return value


def create_secret_redactor(
    secrets: Iterable[str],
    *,
    replacement: str = DEFAULT_REPLACEMENT,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> SecretRedactor:
    """A redactor for the given exact secret strings (empty strings are ignored)."""
    return SecretRedactor(secrets, replacement=replacement, max_depth=max_depth)


@lru_cache(maxsize=128)
def _cached_secret_redactor(secrets: tuple[str, ...]) -> SecretRedactor:
    return SecretRedactor(secrets)


def effective_redactor(secrets: Iterable[str] | None, redactor: Redactor | None) -> Redactor | None:
    """The redactor dispatch applies: the host's, plus one for ``secrets`` (compiled once per
    distinct secret tuple and cached)."""
    if secrets:
        given = _secret_tuple(secrets)
        if all(type(secret) is str for secret in given):
            from_secrets = _cached_secret_redactor(given)
        else:
            # Not a cache key (it may hold a list, which is not hashable); the core refuses
            # what is not a string.
            from_secrets = SecretRedactor(given)
        if len(from_secrets):
            return from_secrets if redactor is None else ChainedRedactor((redactor, from_secrets))
    return redactor


def redact_run_ledger_record(record: ToolCallRecord, redactor: Redactor | None) -> ToolCallRecord:
    """The record with every field scrubbed and ``redacted=True``; unchanged without a redactor."""
    if not isinstance(record, ToolCallRecord):
        raise TypeError(f"record must be a ToolCallRecord, got {type(record).__name__}")
    if redactor is None:
        return record
    redact = getattr(redactor, "redact", None)
    if not callable(redact):
        raise TypeError(
            "redactor must be a redactor with a redact(value) method, got "
            f"{type(redactor).__name__}"
        )
    scrubbed = redact(record)
    if not isinstance(scrubbed, ToolCallRecord):
        raise TypeError("a redactor must return a value of the type it was given")
    return dataclasses.replace(scrubbed, redacted=True)
