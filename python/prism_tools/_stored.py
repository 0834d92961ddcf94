"""Reading data the library stored and read back (session states, effect records, ledger rows).

Such data can be changed outside the library, so each field is checked, never coerced (``"7"``
is not seven, ``"false"`` is not false): a missing or wrong field is a ``ValueError`` naming the
field and the expected kind, never quoting the stored value. Fields a reader does not ask for
are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from prism_tools.types import ToolResult

_MISSING: Final = object()


def is_name(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def is_mapping(value: Any) -> bool:
    return isinstance(value, Mapping)


def is_object(value: Any) -> bool:
    """A JSON object: a mapping with string keys."""
    return isinstance(value, Mapping) and all(isinstance(key, str) for key in value)


class StoredFields:
    """The fields of one stored object; ``what`` names it in every message."""

    __slots__ = ("_data", "what")

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{what} must be an object, got {type(data).__name__}")
        self._data = data
        self.what = what

    def __contains__(self, name: str) -> bool:
        return name in self._data

    def get(self, name: str, default: Any = None) -> Any:
        """A field taken as it is (values JSON may hold anywhere: arguments, progress)."""
        return self._data.get(name, default)

    def read(
        self, name: str, expected: str, test: Callable[[Any], bool], default: Any = _MISSING
    ) -> Any:
        """Field ``name`` if ``test`` accepts it. With a ``default``, a missing or null field
        gives it; without one, a missing field is refused."""
        value = self._data.get(name, _MISSING)
        if value is _MISSING or (value is None and default is not _MISSING):
            if default is _MISSING:
                raise ValueError(f"{self.what} lacks {name!r}")
            return default
        if not test(value):
            raise ValueError(
                f"{self.what} field {name!r} must be {expected}, got {type(value).__name__}"
            )
        return value

    def text(self, name: str, *, optional: bool = False) -> Any:
        """A string field (``None`` allowed when ``optional``). A missing required field is
        named as of the wrong kind (``NoneType``), as a null one is."""
        value = self._data.get(name)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            expected = "a string or null" if optional else "a string"
            raise ValueError(
                f"{self.what} field {name!r} must be {expected}, got {type(value).__name__}"
            )
        return value

    def choice(self, name: str, choices: tuple[str, ...]) -> Any:
        value = self._data.get(name)
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{self.what} field {name!r} must be one of {', '.join(choices)}")
        return value

    def result(self, name: str = "result") -> ToolResult | None:
        """A stored ``ToolResult`` (or null)."""
        value = self._data.get(name)
        if value is None:
            return None
        try:
            return ToolResult.from_dict(value)
        except ValueError as err:
            raise ValueError(f"{self.what} field {name!r} is malformed: {err}") from err


__all__ = ["StoredFields", "is_bool", "is_mapping", "is_name", "is_object"]
