"""Secret redaction over nested values.

``create_secret_redactor(secrets)`` compiles every secret into one Aho-Corasick automaton in the
Rust core. ``redact(value)`` first serializes the whole value once and asks the automaton whether
any secret occurs anywhere (raw or JSON-escaped); when none does, the value comes back as the same
object, untouched, which is the common case and costs one ``orjson.dumps``. Only when a secret is
present does it walk the value, rebuilding just the containers on the path to a secret: strings,
dict keys and values, lists, tuples, sets and dataclass fields. The input is never mutated.

Every secret is also matched as Python and JSON print it (``repr``, ``ascii``, a ``bytes``
repr, a JSON string body): a secret with a quote, a line break or a non-ASCII character reaches
text through those spellings (an exception's ``KeyError('...')``, the ``str()`` of a container, a
tool's JSON text), and the raw spelling alone would miss it there.

The walk reads a value the way the JSON writer of events and ledger rows does, so what it
leaves is what gets written: a dataclass by all its attributes, an ``Enum`` member by its
value, an object with ``to_dict()`` by what that returns, a named tuple or a subclass of a
built-in container by its items. Such an object that held a secret comes back rebuilt where
that is safe (``dataclasses.replace``, a named tuple's ``_make``), and as its plain JSON form,
redacted, where it is not or where the rebuilt copy would still show a secret.

Bounds: below ``max_depth`` (32) levels a subtree that still holds a secret becomes
``"[MaxDepth]"`` (one without a secret is kept as is); a container that contains itself becomes
``"[Circular]"``; an object the walk cannot open whose ``str()`` holds a secret is replaced by
that string, redacted, so a secret never leaves inside an opaque object.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Final, Protocol, TypeVar

from prism_tools import _json
from prism_tools._core import SecretMatcher
from prism_tools.types import ToolCallRecord

T = TypeVar("T")

MAX_SECRETS: Final = 65_536
"""Most secrets (and escaped spellings of them) one redactor takes: the core's limit."""
MAX_SECRET_BYTES: Final = 65_536
"""Longest secret (or escaped spelling of one) in UTF-8 bytes: the core's limit."""

DEFAULT_REPLACEMENT = "[REDACTED]"
DEFAULT_MAX_DEPTH = 32
MAX_DEPTH_CEILING = 256
MAX_DEPTH_MARKER = _json.MAX_DEPTH_MARKER
CIRCULAR_MARKER = _json.CIRCULAR_MARKER


def instance_attributes(value: Any) -> dict[str, Any]:
    """Every attribute a dataclass instance holds: its fields, then what its ``__dict__`` holds
    besides (a ``__post_init__`` may set more)."""
    attributes = {
        field.name: getattr(value, field.name, None) for field in dataclasses.fields(value)
    }
    for name, item in getattr(value, "__dict__", {}).items():
        attributes.setdefault(name, item)
    return attributes


# Modules whose value types (records, events, results) the walk rebuilds field by field.
_OWN_TYPES = ("prism_tools.",)


class Redactor(Protocol):
    """Anything that can scrub a value: ``redact(value)`` returns a copy without secrets."""

    def redact(self, value: T) -> T: ...


def secret_spellings(secret: str) -> set[str]:
    """How Python and JSON print ``secret`` inside other text (``repr``, ``ascii``, a ``bytes``
    repr, a JSON string body with and without ASCII escapes), besides as it is."""
    quoted = secret + '"'  # beside a double quote, repr picks single quotes and escapes "'"
    spelled = {
        str.__repr__(secret)[1:-1],
        str.__repr__(quoted)[1:-2],
        ascii(str(secret))[1:-1],
        ascii(str(quoted))[1:-2],
        repr(secret.encode("utf-8", "surrogatepass"))[2:-1],
        repr(quoted.encode("utf-8", "surrogatepass"))[2:-2],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }
    spelled.discard(secret)
    spelled.discard("")
    return spelled


def _with_spellings(secrets: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The distinct non-empty secrets (what is not a string kept for the core to refuse), and
    every other spelling of them. Repeats and empty strings are dropped here, so they do not
    count toward the core's limit on the number of secrets."""
    kept: list[str] = []
    seen: set[str] = set()
    spelled: set[str] = set()
    for secret in secrets:
        if isinstance(secret, str):
            # The characters, as plain text: a subclass's own __str__, __hash__ or encode (one
            # that masks itself as "***") must not change what is looked for.
            secret = str.__str__(secret)
            if not secret or secret in seen:
                continue
            seen.add(secret)
            spelled |= secret_spellings(secret)
        kept.append(secret)
    return kept, [spelling for spelling in spelled if spelling not in seen]


def _matcher(given: tuple[str, ...], replacement: str) -> tuple[SecretMatcher, int]:
    """The core's matcher for ``given`` and their spellings, and how many distinct secrets
    there are. The core's limits count the spellings too: a refusal that only they caused says
    so, rather than blame the secrets as given."""
    kept, spellings = _with_spellings(given)
    try:
        return SecretMatcher((*kept, *spellings), replacement=replacement), len(kept)
    except ValueError as err:
        text = str(err)
    if "secrets are accepted" in text and len(kept) <= MAX_SECRETS:
        text = (
            f"{len(kept)} secrets make {len(kept) + len(spellings)} with the escaped spellings "
            f"the redactor also looks for (JSON, repr, bytes); at most {MAX_SECRETS} are accepted"
        )
    elif "longer than" in text and all(
        len(secret.encode("utf-8", "surrogatepass")) <= MAX_SECRET_BYTES for secret in kept
    ):
        text = (
            f"a secret is longer than {MAX_SECRET_BYTES} bytes once escaped (the redactor "
            "also looks for its JSON, repr and bytes spellings)"
        )
    raise ValueError(text)


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

    __slots__ = ("_count", "_matcher", "max_depth")

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
        given = _secret_tuple(secrets)
        # The core took them, so every one kept is a distinct non-empty string.
        self._matcher, self._count = _matcher(given, replacement)
        self.max_depth = max_depth

    def __len__(self) -> int:
        """Number of distinct non-empty secrets."""
        return self._count

    def __repr__(self) -> str:
        # Never show the secrets themselves.
        return f"SecretRedactor(<{self._count} secrets>)"

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        replaced = self._matcher.replace(text)
        return text if replaced is None else replaced

    def contains_secret(self, value: Any) -> bool:
        """Whether any secret occurs anywhere in ``value`` (strings, keys, nested data)."""
        return self._scan(value) is not False

    def _scan(self, value: Any) -> bool | None:
        """``contains_secret``, or ``None`` when the value cannot be written whole to scan (too
        deep, cyclic, holding a lone surrogate)."""
        if not self._count:
            return False
        if isinstance(value, str):
            return self._matcher.contains(value)
        try:
            blob = _json.dumps_for_scan(value)
        except Exception:
            return None
        return self._matcher.contains_json(blob)

    def redact(self, value: T) -> T:
        """A copy of ``value`` with every secret replaced; the same object if none occurs."""
        if self._scan(value) is False:
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
        kind = type(value)
        if kind is dict or kind is list:
            return self._walk_builtin(value, depth, ancestors)
        if kind is tuple:
            items = self._walked_items(value, depth, ancestors)
            return value if items is None else tuple(items)
        if kind is set or kind is frozenset:
            return kind(self._walk(item, depth, ancestors) for item in value)
        if isinstance(value, type):
            return self._walk_opaque(value)
        # A host's own kind of value: read as the JSON writer reads it, and checked again. The
        # harness's own types are dataclasses whose to_dict() writes their fields: they are
        # rebuilt field by field instead, exactly, and need no second look.
        own = kind.__module__.startswith(_OWN_TYPES)
        redacted = self._walk_object(value, depth, ancestors, read_to_dict=not own)
        if redacted is value or own:
            return redacted
        if self._scan(redacted) is False:
            return redacted  # (a scan that cannot decide counts as a secret still there)
        # Rebuilt, it still shows a secret (a __post_init__ that derives one, a repr of its
        # own): its plain JSON form, whose every string the walk reaches, leaves instead.
        return self._walk(_json.loads(_json.dumps_lenient(value)), depth, ancestors)

    def _walk_builtin(self, value: Any, depth: int, ancestors: set[int]) -> Any:
        if isinstance(value, Mapping):
            return self._walk_mapping(value, depth, ancestors)
        items = self._walked_items(value, depth, ancestors)
        return value if items is None else items

    def _walked_items(self, value: Any, depth: int, ancestors: set[int]) -> list[Any] | None:
        """The walked items of a sequence or set, or None when none of them changed."""
        members = list(value)
        items = [self._walk(item, depth, ancestors) for item in members]
        return None if all(a is b for a, b in zip(items, members, strict=True)) else items

    def _walk_object(
        self, value: Any, depth: int, ancestors: set[int], *, read_to_dict: bool
    ) -> Any:
        to_dict = getattr(value, "to_dict", None) if read_to_dict else None
        if callable(to_dict):  # the writer's order: to_dict() first, whatever else the value is
            try:
                written = to_dict()
            except Exception:
                return self._walk_opaque(value)
            if written is not value and type(written) is not type(value):
                plain = self._walk(written, depth, ancestors)
                return value if plain is written else plain
        if dataclasses.is_dataclass(value):
            return self._walk_dataclass(value, depth, ancestors)
        if isinstance(value, enum.Enum):
            # Written as its value; a member cannot be rebuilt around a redacted one.
            plain = self._walk(value.value, depth, ancestors)
            return value if plain is value.value else plain
        if isinstance(value, Mapping | list):
            return self._walk_builtin(value, depth, ancestors)
        if isinstance(value, tuple):
            items = self._walked_items(value, depth, ancestors)
            if items is None:
                return value
            make = getattr(value, "_make", None)  # a named tuple keeps its kind
            try:
                return make(items) if callable(make) else tuple(items)
            except Exception:
                return tuple(items)
        if isinstance(value, set | frozenset):
            walked = self._walked_items(value, depth, ancestors)
            if walked is None:
                return value
            # A subclass's constructor may not take an iterable of items: the base kind does.
            return (frozenset if isinstance(value, frozenset) else set)(walked)
        return self._walk_opaque(value)

    def _walk_mapping(self, value: Mapping[Any, Any], depth: int, ancestors: set[int]) -> Any:
        out: dict[Any, Any] = {}
        changed = not isinstance(value, dict)
        suffixes: dict[Any, int] | None = None
        for key, item in value.items():
            if isinstance(key, str):
                new_key = self.redact_text(key)
            elif self._matcher.contains(_json.text_of(key)):
                # A key that is not a string but spells a secret leaves as redacted text.
                new_key = self.redact_text(_json.text_of(key))
            else:
                new_key = key
            if new_key in out:
                # Two keys that redact to the same text must both survive. The next suffix to
                # try is kept per key, so many keys redacting alike stay linear.
                if suffixes is None:
                    suffixes = {}
                suffix = suffixes.get(new_key, 2)
                while f"{new_key}__{suffix}" in out:
                    suffix += 1
                suffixes[new_key] = suffix + 1
                new_key = f"{new_key}__{suffix}"
            new_item = self._walk(item, depth, ancestors)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value

    def _walk_dataclass(self, value: Any, depth: int, ancestors: set[int]) -> Any:
        attributes = instance_attributes(value)
        redacted = {name: self._walk(item, depth, ancestors) for name, item in attributes.items()}
        if all(redacted[name] is item for name, item in attributes.items()):
            return value
        initial = {
            field.name
            for field in dataclasses.fields(value)
            if field.init and field.name in redacted
        }
        try:
            copy = dataclasses.replace(value, **{name: redacted[name] for name in initial})
            for name, item in redacted.items():
                if name not in initial:
                    # What __init__ does not take (fields with init=False, attributes set by
                    # __post_init__) is written on the copy; object.__setattr__ works on frozen
                    # dataclasses too.
                    object.__setattr__(copy, name, item)
        except Exception:
            # An InitVar, an __init__ of its own, slots: no safe copy. Its attributes leave.
            return redacted
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


# A JSON string literal, or the unterminated one that text cut short ends with.
_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?$)', re.DOTALL)
# The escapes JSON defines (a UTF-16 pair of escapes first); anything else after a backslash is
# left as written.
_JSON_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    r"|\\u([0-9a-fA-F]{4})"
    r'|\\(["\\/bfnrt])'
)
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def _decoded_escape(found: re.Match[str]) -> str:
    high, low, unit, simple = found.groups()
    if high is not None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    if unit is not None:
        return chr(int(unit, 16))
    return _SIMPLE_ESCAPES[simple]


def _decoded_literal(body: str) -> str:
    """The text a JSON string literal's body spells, as Python's ``json`` reads it, but lenient:
    an escape JSON does not define stays as written."""
    return _JSON_ESCAPE.sub(_decoded_escape, body)


def redact_json_text(text: str, redactor: Redactor) -> str:
    r"""Raw JSON text (a model's argument text, kept as sent on a call refused before it was
    parsed) with each string literal that spells a secret once decoded written again, redacted.
    A model chooses its escapes: ``"sk\u002dlive"`` or ``"a\/b"`` spell a secret that no
    matcher finds in the text as it stands. Text that is not JSON is handled literal by literal
    all the same, and what lies outside literals is left to the redactor's plain match."""

    def scrub(found: re.Match[str]) -> str:
        literal = found[0]
        body = literal[1:-1] if len(literal) > 1 and literal.endswith('"') else literal[1:]
        if "\\" not in body:
            return literal  # nothing escaped: the plain match sees it as it is
        decoded = _decoded_literal(body)
        redacted = redactor.redact(decoded)
        if redacted == decoded or not isinstance(redacted, str):
            return literal
        return json.dumps(redacted, ensure_ascii=False)

    scrubbed = _STRING_LITERAL.sub(scrub, text)
    if "\\" not in scrubbed:
        return scrubbed
    # Quotes the literals cannot be told apart by (malformed text, one quote missing) may leave
    # an escaped secret outside every literal found: read the whole text as one, and if that
    # spells a secret, the text leaves decoded and redacted.
    decoded = _decoded_literal(scrubbed)
    redacted = redactor.redact(decoded)
    return scrubbed if redacted == decoded or not isinstance(redacted, str) else redacted


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
