"""JSON Schema validation of tool arguments, backed by the Rust core.

``create_json_schema_adapter(**limits)`` gives a ``ToolArgumentValidator`` over the ``jsonschema``
crate: draft 2020-12 by default (``$schema`` may name draft 2019-09 or 7), every schema checked by
the guards before it is compiled, compiled validators kept in a bounded LRU in Rust.
``create_tool_parameter_validator`` turns an adapter into a dispatch ``validate=`` callback that
checks ``tool.parameters`` and answers with an ``ErrorInfo`` a model can act on.

Schemas are treated as immutable once used: the adapter remembers the compiled validator per
schema object (the last ``max_compiled_schemas`` of them), so a schema dict changed in place
after its first use keeps its old validator. Build a new dict instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeAlias

from prism_tools._core import (
    CompiledSchema,
    SchemaValidator,
    ToolSchemaCheck,
    format_issue_report,
    limit_table,
)
from prism_tools._frozen import twin
from prism_tools.errors import SchemaGuardError
from prism_tools.types import ErrorInfo, JSONValue, ToolDefinition, ToolExecutionContext

MissingSchemaPolicy = Literal["allow", "reject"]

LIMITS: dict[str, tuple[int, int]] = {
    name: (default, ceiling) for name, default, ceiling in limit_table()
}
"""Every limit keyword: ``(default, hard ceiling)``."""

MAX_ISSUES_IN_DETAILS = 256
DEFAULT_MAX_MESSAGE_BYTES = 1024

Found: TypeAlias = tuple[list[tuple[str, str, str]], int]
"""Issues as ``(path, keyword, message)`` (the first ``MAX_ISSUES_IN_DETAILS``) and how many
there were in all. Arguments too large to list every issue of (see ``docs/validation.md``) give
only the first issue, counted as one; the ``ErrorInfo`` reports say so."""
VALID: Found = ([], 0)

# The core builds the invalid-arguments ErrorInfo in place through its mutable twin (see
# _frozen.twin): code "invalid_tool_arguments", name "ArgumentValidationError", details
# {"issues": [...], "count": n}, plus "complete": False when the arguments were too large to
# list every issue (then "issues" holds the first one, or one at the root that locates nothing).
_ErrorInfoTwin = twin(ErrorInfo)


@dataclass(frozen=True, slots=True)
class ArgumentIssue:
    """One problem with tool arguments: where (a JSON Pointer), which keyword, and why. The
    message never quotes the offending value."""

    path: str
    keyword: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "keyword": self.keyword, "message": self.message}


class CacheInfo(NamedTuple):
    """Compiled-schema cache counters, as ``functools.lru_cache`` reports them."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class ToolArgumentValidator(Protocol):
    """Validates a value against a JSON Schema; an empty list means valid."""

    def validate(
        self, schema: Mapping[str, JSONValue] | bool, value: Any
    ) -> list[ArgumentIssue]: ...


def _check_limits(limits: Mapping[str, Any]) -> dict[str, int]:
    for name, value in limits.items():
        if name not in LIMITS:
            raise TypeError(f"unknown limit {name!r}; known limits: {', '.join(sorted(LIMITS))}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an integer")
        ceiling = LIMITS[name][1]
        if not 1 <= value <= ceiling:
            raise ValueError(f"{name} must be from 1 to {ceiling}, got {value}")
    return dict(limits)


class JsonSchemaAdapter:
    """A ``ToolArgumentValidator`` over the Rust core (see the module doc).

    ``parse_and_validate(schema, text)`` turns argument text into ``(dict, issues)`` in one
    crossing: the text is parsed into the core's argument document, validated there, and turned
    into Python objects; ``issues`` is a list of ``ArgumentIssue`` (empty when valid). Raises
    ``ArgumentsError`` when the text is not one JSON object within the limits. It is the core's
    method itself, bound per adapter, so the call costs no Python frame.
    """

    __slots__ = ("_core", "limits", "parse_and_validate")

    parse_and_validate: Callable[
        [Mapping[str, JSONValue] | bool, str | bytes],
        tuple[dict[str, JSONValue], list[ArgumentIssue]],
    ]

    def __init__(self, **limits: int) -> None:
        self.limits: dict[str, int] = {
            name: default for name, (default, _) in LIMITS.items()
        } | _check_limits(limits)
        # The core remembers each schema object's compiled validator (the last
        # `max_compiled_schemas` of them, by identity), so every method below is one call into it.
        self._core = SchemaValidator(**self.limits)
        self.parse_and_validate = self._core.parse_and_list_issues

    def compiled(self, schema: object) -> CompiledSchema:
        """The compiled validator of ``schema``; guards and compiles on first sight."""
        return self._core.compiled(schema)

    def check_schema(self, schema: object) -> None:
        """Raise ``SchemaGuardError`` unless ``schema`` passes the guards and compiles."""
        self._core.compiled(schema)

    def found(
        self, schema: object, value: Any, *, max_issues: int = MAX_ISSUES_IN_DETAILS
    ) -> Found:
        """Issues of ``value`` (the first ``max_issues``) and their total count."""
        found = self._core.validate_with(schema, value, max_issues)
        return VALID if found is None else found

    def validate(self, schema: Mapping[str, JSONValue] | bool, value: Any) -> list[ArgumentIssue]:
        """Issues of ``value`` against ``schema``; empty when valid."""
        found = self._core.validate_with(schema, value, MAX_ISSUES_IN_DETAILS)
        return [] if found is None else [ArgumentIssue(*issue) for issue in found[0]]

    def is_valid(self, schema: Mapping[str, JSONValue] | bool, value: Any) -> bool:
        return self._core.validate_with(schema, value, 1) is None

    def parse_and_find(
        self, schema: object, text: str | bytes
    ) -> tuple[dict[str, JSONValue], Found]:
        """``parse_and_validate`` with raw issues and their total count."""
        arguments, found = self._core.parse_and_validate_with(schema, text, MAX_ISSUES_IN_DETAILS)
        return arguments, VALID if found is None else found

    def parse(self, text: str | bytes) -> dict[str, JSONValue]:
        """Argument text to a dict, guards first; raises ``ArgumentsError``."""
        return self._core.parse(text)

    def cache_info(self) -> CacheInfo:
        """Hits (schemas found already compiled, by identity or in the core's LRU), misses
        (compilations), and the LRU's capacity and size."""
        return CacheInfo(*self._core.cache_info())


def create_json_schema_adapter(**limits: int) -> JsonSchemaAdapter:
    """A JSON Schema adapter with the given limits (defaults and ceilings in ``LIMITS``)."""
    return JsonSchemaAdapter(**limits)


def format_issues(
    tool_name: str,
    issues: list[tuple[str, str, str]],
    total: int | None = None,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> ErrorInfo:
    """The ``ErrorInfo`` a model sees for invalid arguments.

    The message names at most eight issues as ``"<path>: <message>"`` and stays within
    ``max_message_bytes``; parts that do not fit are counted in a closing ``(and N more)``.
    ``details`` lists every issue given (each message cut to 160 bytes) and the total count.
    The Rust core writes the report, the same one the compiled-schema fast path returns.
    """
    total = len(issues) if total is None else total
    return format_issue_report(tool_name, issues, total, max_message_bytes)


def _guard_refusal(tool: ToolDefinition, err: SchemaGuardError) -> ErrorInfo:
    return ErrorInfo(
        message=f"Tool {tool.name} has a parameter schema the harness refuses: {err}",
        code="schema_guard",
        name="SchemaGuardError",
        details={"reason": err.reason},
    )


class ToolParameterValidator(ToolSchemaCheck):
    """A dispatch ``validate=`` callback that checks arguments against ``tool.parameters``.

    With the JSON Schema adapter, a call for a tool with a schema is answered by the core base
    class in one crossing (no Python frame runs); every other call goes through ``_check``. The
    settings are read-only, so the core's copy of them can never go stale.
    """

    __slots__ = ("_adapter", "_max_message_bytes", "_missing_schema")

    def __init__(
        self,
        adapter: ToolArgumentValidator,
        *,
        missing_schema: MissingSchemaPolicy = "allow",
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if missing_schema not in ("allow", "reject"):
            raise ValueError('missing_schema must be "allow" or "reject"')
        if not callable(getattr(adapter, "validate", None)):
            raise TypeError("adapter must have validate(schema, value) -> list[ArgumentIssue]")
        self._adapter = adapter
        self._missing_schema: MissingSchemaPolicy = missing_schema
        self._max_message_bytes = max_message_bytes
        if type(adapter) is JsonSchemaAdapter:
            self._use_core(adapter._core, max_message_bytes, MAX_ISSUES_IN_DETAILS)

    @property
    def adapter(self) -> ToolArgumentValidator:
        return self._adapter

    @property
    def missing_schema(self) -> MissingSchemaPolicy:
        return self._missing_schema

    @property
    def max_message_bytes(self) -> int:
        return self._max_message_bytes

    def _missing(self, tool: ToolDefinition) -> ErrorInfo | None:
        if self._missing_schema == "allow":
            return None
        return ErrorInfo(
            message=f"Tool {tool.name} has no parameter schema and cannot be checked",
            code="missing_parameter_schema",
        )

    if TYPE_CHECKING:
        # Implemented by the core base class, which calls ``_check`` for what it leaves.
        def __call__(
            self,
            tool: ToolDefinition,
            args: Any,
            context: ToolExecutionContext | None = None,
        ) -> ErrorInfo | None: ...

    def _check(
        self,
        tool: ToolDefinition,
        args: Any,
        context: ToolExecutionContext | None = None,
    ) -> ErrorInfo | None:
        """The whole check, for the calls the core base class does not answer itself."""
        schema = tool.parameters
        if schema is None:
            return self._missing(tool)
        adapter = self._adapter
        try:
            if type(adapter) is JsonSchemaAdapter:
                return adapter._core.report_with(
                    schema, args, tool.name, self._max_message_bytes, MAX_ISSUES_IN_DETAILS
                )
            described = adapter.validate(schema, args)
            issues = [(i.path, i.keyword, i.message) for i in described]
            total = len(issues)
        except SchemaGuardError as err:
            return _guard_refusal(tool, err)
        if not total:
            return None
        return format_issues(tool.name, issues, total, max_message_bytes=self._max_message_bytes)

    def parse_checked(
        self, tool: ToolDefinition, text: str | bytes
    ) -> tuple[dict[str, JSONValue], ErrorInfo | None] | None:
        """Parse argument text and check it against ``tool.parameters`` in one crossing.

        Returns ``(arguments, problem)``, or None when this validator cannot do both at once
        (then the caller parses and validates separately). Raises ``ArgumentsError`` for text
        that is not one JSON object within the adapter's limits.
        """
        if type(tool) is not ToolDefinition and not isinstance(tool, ToolDefinition):
            raise TypeError(f"parse_checked expects a ToolDefinition, got {type(tool).__name__}")
        adapter = self._adapter
        schema = tool.parameters
        if type(adapter) is not JsonSchemaAdapter or schema is None:
            return None
        try:
            return adapter._core.parse_and_report_with(
                schema, text, tool.name, self._max_message_bytes, MAX_ISSUES_IN_DETAILS
            )
        except SchemaGuardError as err:
            # The schema is refused before the text is read: parse it alone, so bad text is
            # still reported as bad text.
            return adapter.parse(text), _guard_refusal(tool, err)

    def cache_info(self) -> CacheInfo:
        """Counters of the compiled-schema cache behind this validator."""
        info = getattr(self._adapter, "cache_info", None)
        if info is None:
            raise TypeError("this validator's adapter keeps no cache")
        return info()  # type: ignore[no-any-return]


def create_tool_parameter_validator(
    adapter: ToolArgumentValidator, *, missing_schema: MissingSchemaPolicy = "allow"
) -> ToolParameterValidator:
    """A ``validate=`` callback for dispatch that checks ``tool.parameters`` with ``adapter``
    (any ``ToolArgumentValidator``); ``missing_schema="reject"`` blocks tools without a schema."""
    return ToolParameterValidator(adapter, missing_schema=missing_schema)


def create_json_schema_tool_argument_validator(
    *, missing_schema: MissingSchemaPolicy = "allow", **limits: int
) -> ToolParameterValidator:
    """``create_tool_parameter_validator(create_json_schema_adapter(**limits))`` in one call."""
    return ToolParameterValidator(JsonSchemaAdapter(**limits), missing_schema=missing_schema)


@lru_cache(maxsize=32)
def _shared_adapter(limits: tuple[tuple[str, int], ...]) -> JsonSchemaAdapter:
    return JsonSchemaAdapter(**dict(limits))


def default_adapter(**limits: int) -> JsonSchemaAdapter:
    """A process-wide adapter for the given limits (built once per distinct set)."""
    return _shared_adapter(tuple(sorted(_check_limits(limits).items())))


def check_schema(schema: object, **limits: int) -> None:
    """Run the guards on ``schema`` and compile it; raises ``SchemaGuardError`` naming the limit
    or rule it breaks and where."""
    default_adapter(**limits).check_schema(schema)


def parse_tool_arguments(
    text: str | bytes,
    *,
    max_bytes: int = LIMITS["max_argument_bytes"][0],
    max_depth: int = LIMITS["max_argument_depth"][0],
) -> dict[str, JSONValue]:
    """Raw argument text to a dict in one crossing into Rust, size and depth guarded first.

    Empty (or all-whitespace) text is ``{}``. Raises ``ArgumentsError`` (code
    ``invalid_json_arguments``) with a short message for bad JSON, JSON that is not an object,
    and text too large or too deep.
    """
    return default_adapter(max_argument_bytes=max_bytes, max_argument_depth=max_depth).parse(text)
