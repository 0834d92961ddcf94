"""Typed stub of the compiled core. Users import ``prism_tools``, not this module."""

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Final, Protocol, Self, final

from typing_extensions import disjoint_base

from prism_tools.types import ErrorInfo
from prism_tools.validation import ArgumentIssue

__all__ = [
    "CHECK_DENIED",
    "CHECK_NOT_OBJECT",
    "CHECK_UNKNOWN",
    "SEARCH_DEFAULT_MAX_INDEXED",
    "SEARCH_DEFAULT_MAX_QUERY_BYTES",
    "SEARCH_DEFAULT_TOP_K",
    "SEARCH_MAX_INDEXED_CEILING",
    "SEARCH_MAX_QUERY_BYTES_CEILING",
    "SEARCH_MAX_TOP_K",
    "ArgumentsError",
    "CompiledSchema",
    "DuplicateToolError",
    "PrismError",
    "Registry",
    "SchemaGuardError",
    "SchemaValidator",
    "SearchHit",
    "SecretMatcher",
    "ToolFilter",
    "ToolSchemaCheck",
    "ToolSearchCapacityError",
    "ToolSearchIndex",
    "__version__",
    "format_issue_report",
    "limit_table",
    "row_ids",
]

__version__: Final[str]
CHECK_UNKNOWN: Final[int]
CHECK_DENIED: Final[int]
CHECK_NOT_OBJECT: Final[int]
SEARCH_DEFAULT_TOP_K: Final[int]
SEARCH_MAX_TOP_K: Final[int]
SEARCH_DEFAULT_MAX_INDEXED: Final[int]
SEARCH_MAX_INDEXED_CEILING: Final[int]
SEARCH_DEFAULT_MAX_QUERY_BYTES: Final[int]
SEARCH_MAX_QUERY_BYTES_CEILING: Final[int]

class PrismError(Exception):
    """Base class of every error prism-tools raises on purpose."""

    code: str

class DuplicateToolError(PrismError):
    """A tool name registered twice under the "error" policy."""

class SchemaGuardError(PrismError):
    """A JSON Schema exceeded a guard limit, used something refused, or could not be compiled."""

    @property
    def reason(self) -> str | None: ...

class ArgumentsError(PrismError):
    """Tool argument text that is not one JSON object within the limits."""

    @property
    def reason(self) -> str | None: ...

@final
class Registry:
    """Insertion-ordered tool name table; the Python facade keeps definitions by slot."""

    def __new__(cls, duplicate: str = "replace") -> Registry: ...
    @property
    def duplicate(self) -> str: ...
    def insert(self, name: str, tool: object, tools: list[Any]) -> tuple[int, bool]:
        """Add or replace ``name`` and put ``tool`` in its slot of ``tools``, in one step;
        returns ``(slot, replaced)``."""
    def slot(self, name: str) -> int | None: ...
    def check_call(self, name: str, filter: ToolFilter | None, arguments: object) -> int:
        """Lookup, filter and argument shape: the slot, ``CHECK_UNKNOWN``, ``CHECK_DENIED``, or
        ``CHECK_NOT_OBJECT - slot`` when permitted but the arguments are not a JSON object."""
    def names(self) -> list[str]: ...
    def permitted_slots(self, filter: ToolFilter) -> list[int]: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: object, /) -> bool: ...

@final
class ToolFilter:
    """A compiled exact-name allow/deny filter: any deny wins, every non-empty allow must hold."""

    def __new__(
        cls, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> ToolFilter: ...
    @staticmethod
    def all_of(filters: Sequence[ToolFilter]) -> ToolFilter:
        """One filter equal to applying every filter in ``filters``."""
    @property
    def deny(self) -> frozenset[str]: ...
    @property
    def allow(self) -> frozenset[str] | None:
        """Names every allow list admits; None when no allow list restricts anything."""
    def permits(self, name: str) -> bool: ...
    def apply(self, names: Sequence[str]) -> list[int]:
        """Indexes of the permitted names, in input order."""
    def is_permissive(self) -> bool: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class SecretMatcher:
    """One Aho-Corasick automaton over a fixed set of secrets."""

    def __new__(cls, secrets: Sequence[str], *, replacement: str | None = None) -> SecretMatcher:
        """``replacement`` None stands for ``"[REDACTED]"``."""
    def replace(self, text: str) -> str | None: ...
    def contains(self, text: str) -> bool: ...
    def contains_json(self, data: bytes) -> bool: ...
    @property
    def replacement(self) -> str: ...
    def __len__(self) -> int: ...

_Issue = tuple[str, str, str]
"""``(path, keyword, message)`` of one validation problem."""
_Report = tuple[str, list[dict[str, str]], int]
"""``(message, details issues, count)`` of invalid arguments."""

@final
class CompiledSchema:
    """One compiled schema; whoever holds it keeps it, whatever the cache evicts."""

    def validate(self, instance: object, max_issues: int = 64) -> tuple[list[_Issue], int] | None:
        """The first ``max_issues`` issues and their count; None if valid."""
    def parse_and_validate(
        self, text: str | bytes, max_issues: int = 64
    ) -> tuple[dict[str, object], tuple[list[_Issue], int] | None]:
        """Guarded parse of argument text and validation, in one crossing."""
    def report(
        self,
        instance: object,
        tool_name: str,
        max_message_bytes: int = 1024,
        max_issues: int = 256,
    ) -> _Report | None:
        """Validation and, for invalid arguments, the report a model sees; None if valid."""
    def parse_and_report(
        self,
        text: str | bytes,
        tool_name: str,
        max_message_bytes: int = 1024,
        max_issues: int = 256,
    ) -> tuple[dict[str, object], _Report | None]:
        """Guarded parse of argument text, validation and report, in one crossing."""

@disjoint_base
class ToolSchemaCheck:
    """Base of ``ToolParameterValidator``: once bound with ``_use_core``, calls for tools with a
    schema are answered in the core; every other call goes to the subclass's ``_check``."""

    def __new__(cls, *args: object, **kwargs: object) -> Self: ...
    def _use_core(self, core: SchemaValidator, max_message_bytes: int, max_issues: int) -> None: ...
    def __call__(self, tool: Any, args: Any, context: Any = None) -> Any: ...

@final
class SchemaValidator:
    """Schema guards, a compiled-schema LRU and argument parsing under one set of limits."""

    def __new__(cls, **limits: int) -> SchemaValidator: ...
    @property
    def limits_dict(self) -> list[tuple[str, int]]: ...
    def compile(self, schema: object) -> CompiledSchema:
        """Guards and compiles (or finds in the cache); raises ``SchemaGuardError``."""
    def parse(self, text: str | bytes) -> dict[str, object]:
        """Guarded parse of argument text; raises ``ArgumentsError``."""
    def cache_info(self) -> tuple[int, int, int, int]: ...
    def compiled(self, schema: object) -> CompiledSchema:
        """The compiled schema of a schema object, remembered by identity."""
    def validate_with(
        self, schema: object, instance: object, max_issues: int = 64
    ) -> tuple[list[_Issue], int] | None:
        """``compiled(schema).validate(instance, max_issues)`` in one call."""
    def parse_and_validate_with(
        self, schema: object, text: str | bytes, max_issues: int = 64
    ) -> tuple[dict[str, object], tuple[list[_Issue], int] | None]:
        """``compiled(schema).parse_and_validate(text, max_issues)`` in one call."""
    def parse_and_list_issues(
        self, schema: object, text: str | bytes, max_issues: int = 256
    ) -> tuple[dict[str, Any], list[ArgumentIssue]]:
        """``JsonSchemaAdapter.parse_and_validate``: the dict and its issues as
        ``ArgumentIssue`` objects (an empty list when valid)."""
    def report_with(
        self,
        schema: object,
        instance: object,
        tool_name: str,
        max_message_bytes: int = 1024,
        max_issues: int = 256,
    ) -> ErrorInfo | None:
        """``compiled(schema).report(...)`` in one call, as the invalid-arguments ``ErrorInfo``
        (None if valid)."""
    def parse_and_report_with(
        self,
        schema: object,
        text: str | bytes,
        tool_name: str,
        max_message_bytes: int = 1024,
        max_issues: int = 256,
    ) -> tuple[dict[str, object], ErrorInfo | None]:
        """``compiled(schema).parse_and_report(...)`` in one call, the report as the
        invalid-arguments ``ErrorInfo``."""

def format_issue_report(
    tool_name: str, issues: list[_Issue], total: int, max_message_bytes: int = 1024
) -> ErrorInfo:
    """The invalid-arguments ``ErrorInfo`` a model sees for ``issues`` of ``tool_name``."""

def limit_table() -> list[tuple[str, int, int]]:
    """``(name, default, ceiling)`` of every limit."""

class ToolSearchCapacityError(PrismError):
    """More tools than a tool search index may hold."""

class _NamedTool(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...

class _ToolSource(Protocol):
    def list(self) -> Sequence[_NamedTool]: ...

@final
class SearchHit:
    """One tool found by a search: its name, its BM25 score and the query words it matched."""

    @property
    def name(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def matched(self) -> tuple[str, ...]: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@final
class ToolSearchIndex:
    """A BM25 index over tool names and descriptions, built once, searched many times."""

    def __new__(
        cls,
        tools: Iterable[_NamedTool] | _ToolSource | None = None,
        *,
        max_indexed: int | None = None,
        max_query_bytes: int | None = None,
    ) -> ToolSearchIndex: ...
    def search(self, query: str, k: int | None = None) -> list[SearchHit]:
        """The best ``k`` tools for ``query``, best first; ties keep index order."""
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def max_indexed(self) -> int: ...
    @property
    def max_query_bytes(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: object, /) -> bool: ...

def row_ids(prefix: str, first: int, count: int) -> list[str]:
    """Ledger row ids ``<prefix><n in lowercase hex>`` for ``n`` from ``first``, ``count`` of
    them (at most 65,536)."""
