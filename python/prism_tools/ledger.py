"""The audit ledger: one row per lifecycle transition of a tool call.

A ledger is anything with ``append_tool_call(record)`` (sync or async). Dispatch awaits each append
before it moves on, so a row is stored before the step it describes proceeds. Rows reach the
ledger already redacted when dispatch has secrets or a redactor.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, Protocol, TypeAlias, get_args

from prism_tools import _json
from prism_tools._stored import StoredFields, is_bool, is_mapping
from prism_tools.types import LedgerStatus, ToolCallRecord, to_plain

# What a durable ledger's text columns cannot hold: NUL (PostgreSQL text refuses it) and lone
# surrogates (no UTF-8 spelling; a JSON decoder makes them from a model's "\ud800").
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def column_text(value: str) -> str:
    """``value`` as a durable ledger's text column holds it: NUL and each lone surrogate become
    U+FFFD, so a model's odd call id or tool name never stops the row from being written."""
    if not isinstance(value, str):
        return value  # the driver refuses it with its own message
    if value.isascii() and "\x00" not in value:
        return value
    return _UNSTORABLE.sub("\ufffd", value)


def row_columns(record: ToolCallRecord) -> tuple[str, str, str, str, str, str]:
    """A durable ledger's indexed columns of ``record``: row id, session id, run id, tool call
    id, tool name and status, each as ``column_text`` stores it (one that is not text, as its
    text)."""
    return (
        column_text(_text(record.id)),
        column_text(_text(record.session_id)),
        column_text(_text(record.run_id)),
        column_text(_text(record.tool_call_id)),
        column_text(_text(record.name)),
        record.status,
    )


def _text(value: Any) -> str:
    """An id as a durable ledger stores it: a string by its characters (a ``str`` subclass such
    as a ``StrEnum`` member too, whatever its ``__str__`` says), anything else as the text of its
    JSON form (a tuple as ``[1, 2]``), so a query by the same value finds it."""
    if type(value) is str:
        return value
    if issubclass(type(value), str):  # its real type: a proxy claiming to be a str is not one
        return str.__str__(value)
    return _json.text_of(to_plain(value))


StoredRow: TypeAlias = tuple[str, str, str, str, str, str, str]
"""A durable ledger's row: the indexed columns (``row_columns``) and the row's JSON text."""


def stored_row(record: ToolCallRecord) -> StoredRow:
    """``record`` as a durable ledger stores it; anything else is a ``TypeError``. A text field
    holding something else (a host's call with an integer id, a tool name the model sent as a
    number) is stored as its text, so the row reads back like every other."""
    if not isinstance(record, ToolCallRecord):
        raise TypeError(f"ledger rows must be ToolCallRecord, got {type(record).__name__}")
    data = record.to_dict()
    _texts_as_text(data, _ROW_TEXTS, required=True)
    _texts_as_text(data, _ROW_OPTIONAL_TEXTS, required=False)
    result = data.get("result")
    if isinstance(result, dict):
        _texts_as_text(result, ("tool_call_id", "name"), required=True)
    return (*row_columns(record), _json.dumps_lenient(data).decode("utf-8"))


def _texts_as_text(data: dict[str, Any], names: tuple[str, ...], *, required: bool) -> None:
    for name in names:
        value = data.get(name)
        if type(value) is not str and (required or value is not None):
            data[name] = _text(value)


_ROW: Final = "stored ledger row"
_ROW_TEXTS: Final = ("id", "session_id", "run_id", "tool_call_id", "name", "started_at")
_ROW_OPTIONAL_TEXTS: Final = (
    "entry_id",
    "tenant_id",
    "account_id",
    "user_id",
    "finished_at",
    "reason",
    "progress_at",
)
_ROW_STATUSES: Final = get_args(LedgerStatus)


def record_from_dict(data: Any) -> ToolCallRecord:
    """A ledger row back from its ``to_dict`` form. Rows can be changed outside the library, so
    each field is checked, not coerced: a missing or wrong one is a ``ValueError`` naming it
    (fields this version does not know are ignored)."""
    field = StoredFields(data, _ROW)
    redacted = field.read("redacted", "true or false", is_bool) if "redacted" in field else False
    return ToolCallRecord(
        **{name: field.text(name) for name in _ROW_TEXTS},
        **{name: field.text(name, optional=True) for name in _ROW_OPTIONAL_TEXTS},
        **{
            name: field.read(name, "an object or null", is_mapping, default=None)
            for name in ("progress_metadata", "metadata")
        },
        status=field.choice("status", _ROW_STATUSES),
        redacted=redacted,
        result=field.result(),
        arguments=field.get("arguments"),
        progress=field.get("progress"),
    )


def row_filter(
    placeholder: str,
    session_id: str | None,
    run_id: str | None,
    tool_call_id: str | None,
    column: Callable[[str], tuple[str, ...]] = lambda text: (column_text(text),),
) -> tuple[str, list[str]]:
    """The ``WHERE`` clause (or nothing) and its values for a durable ledger's ``rows`` query;
    ``placeholder`` is the driver's parameter marker (``?`` or ``%s``), ``column`` the texts an
    id may be stored as in its column (more than one when an earlier version stored it
    otherwise). An id that is not text is looked for as its text, as ``stored_row`` stores
    it."""
    clauses: list[str] = []
    values: list[str] = []
    for name, value in _asked(session_id, run_id, tool_call_id):
        forms = [form for text in _id_texts(value) for form in column(text)]
        clauses.append(f"{name} IN ({', '.join([placeholder] * len(forms))})")
        values.extend(forms)
    return (f" WHERE {' AND '.join(clauses)}" if clauses else ""), values


def _asked(session_id: Any, run_id: Any, tool_call_id: Any) -> list[tuple[str, Any]]:
    """The ids a ``rows`` query gives, by column."""
    given = (("session_id", session_id), ("run_id", run_id), ("tool_call_id", tool_call_id))
    return [(name, value) for name, value in given if value is not None]


def exact_rows(
    texts: Iterable[str],
    session_id: str | None,
    run_id: str | None,
    tool_call_id: str | None,
) -> list[ToolCallRecord]:
    """The rows a ``row_filter`` query found, read, less those whose ids only share their
    column text with the ids asked for: columns hold NUL as U+FFFD (and PostgreSQL cuts a very
    long id), while the row's JSON keeps NUL and the whole id. (A lone surrogate is U+FFFD in
    the JSON too, so an id holding one shares its rows with the one spelled with U+FFFD.)"""
    records = [record_from_dict(_json.loads(text)) for text in texts]
    wanted = [
        (name, {_json.replace_lone_surrogates(text) for text in _id_texts(value)})
        for name, value in _asked(session_id, run_id, tool_call_id)
    ]
    if not wanted:
        return records
    return [
        record
        for record in records
        if all(getattr(record, name) in texts for name, texts in wanted)
    ]


def _id_texts(value: Any) -> tuple[str, ...]:
    """The texts an id is stored as: ``_text``, and for one that is not a string also its
    ``str()``, as the version before stored it (a ``(str, Enum)`` member as ``"Ids.FIRST"``)."""
    text = _text(value)
    if type(value) is str:
        return (text,)
    earlier = _json.text_of(value)
    return (text,) if earlier == text else (text, earlier)


class RunLedger(Protocol):
    def append_tool_call(self, record: ToolCallRecord) -> Awaitable[None] | None: ...


class InMemoryRunLedger:
    """Keeps rows in a list, in append order. Safe to share between threads and tasks: a list
    append and a list copy are each atomic in CPython (and internally locked on free-threaded
    builds), so no lock of our own is needed."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: list[ToolCallRecord] = []

    def append_tool_call(self, record: ToolCallRecord) -> None:
        if type(record) is not ToolCallRecord and not isinstance(record, ToolCallRecord):
            raise TypeError(f"ledger rows must be ToolCallRecord, got {type(record).__name__}")
        self._records.append(record)

    @property
    def records(self) -> list[ToolCallRecord]:
        """A snapshot of every row, oldest first."""
        return self._records.copy()

    def rows(
        self,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> list[ToolCallRecord]:
        """Rows matching every given id, oldest first."""
        return [
            row
            for row in self.records
            if (session_id is None or row.session_id == session_id)
            and (run_id is None or row.run_id == run_id)
            and (tool_call_id is None or row.tool_call_id == tool_call_id)
        ]

    def __len__(self) -> int:
        return len(self._records)
