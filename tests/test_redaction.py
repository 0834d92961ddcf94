"""SecretRedactor: what it replaces, what it leaves alone, and the bounds of its walk."""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import enum
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from tests.support import Unprintable, any_text

from prism_tools import (
    ErrorInfo,
    SecretRedactor,
    ToolCallRecord,
    ToolResult,
    _json,
    create_secret_redactor,
    redact_run_ledger_record,
)
from prism_tools.redaction import instance_attributes, redact_json_text, secret_spellings
from prism_tools.types import to_plain as types_to_plain

SECRET = "sk-live-4f2c9d"
REPLACEMENT = "[REDACTED]"


def all_strings(value: Any) -> Iterator[str]:
    """Every string inside ``value``: values, dict keys, set members and dataclass fields."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from all_strings(key)
            yield from all_strings(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from all_strings(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from all_strings(getattr(value, field.name))


def holds(value: Any, secret: str = SECRET) -> bool:
    """Whether any string inside ``value`` contains ``secret``."""
    return any(secret in text for text in all_strings(value))


def nest(value: Any, levels: int) -> Any:
    """``value`` wrapped in ``levels`` single-item lists."""
    for _ in range(levels):
        value = [value]
    return value


def unwrap(value: Any) -> tuple[Any, int]:
    """The innermost item of a chain of single-item lists, and how many lists wrap it."""
    levels = 0
    while isinstance(value, list):
        value = value[0]
        levels += 1
    return value, levels


class Opaque:
    """An object the walk cannot open; only its ``str`` says what is inside."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return f"Opaque({self.text})"


class HiddenMapping(Mapping[str, Any]):
    """A read-only mapping that is not a ``dict`` and whose ``str`` does not show its items."""

    def __init__(self, items: dict[str, Any]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    __repr__ = object.__repr__
    __str__ = object.__str__


# --- what gets replaced ------------------------------------------------------------------------


def test_a_plain_string_is_redacted() -> None:
    redactor = create_secret_redactor([SECRET])
    assert redactor.redact(f"key={SECRET}; again {SECRET}") == "key=[REDACTED]; again [REDACTED]"
    assert redactor.redact_text(f"<{SECRET}>") == "<[REDACTED]>"


def test_nested_containers_are_redacted_and_keep_their_types() -> None:
    redactor = create_secret_redactor([SECRET])
    value = {
        "list": [f"a {SECRET}", 1, None, True],
        "tuple": (SECRET, "clean"),
        "set": {f"{SECRET}!", "clean"},
        "frozen": frozenset({SECRET}),
        "deep": {"deeper": [{"deepest": (f"x{SECRET}x",)}]},
    }
    out = redactor.redact(value)
    assert out == {
        "list": ["a [REDACTED]", 1, None, True],
        "tuple": ("[REDACTED]", "clean"),
        "set": {"[REDACTED]!", "clean"},
        "frozen": frozenset({"[REDACTED]"}),
        "deep": {"deeper": [{"deepest": ("x[REDACTED]x",)}]},
    }
    assert type(out["tuple"]) is tuple
    assert type(out["set"]) is set
    assert type(out["frozen"]) is frozenset


def test_dict_keys_are_redacted() -> None:
    redactor = create_secret_redactor([SECRET])
    assert redactor.redact({f"user:{SECRET}": 1, "plain": 2}) == {
        "user:[REDACTED]": 1,
        "plain": 2,
    }


def test_keys_that_redact_to_the_same_text_all_survive_with_suffixes() -> None:
    redactor = create_secret_redactor(["alpha-key", "beta-key", "gamma-key"])
    out = redactor.redact({"alpha-key": 1, "beta-key": 2, "gamma-key": 3, "other": 4})
    assert out == {"[REDACTED]": 1, "[REDACTED]__2": 2, "[REDACTED]__3": 3, "other": 4}


def test_suffixes_skip_a_literal_key_that_already_holds_the_next_one() -> None:
    # The next suffix is remembered per key (many colliding keys stay linear): a literal
    # "[REDACTED]__3" met in between must still be stepped over, not overwritten.
    redactor = create_secret_redactor(["alpha-key", "beta-key", "gamma-key"])
    out = redactor.redact(
        {"alpha-key": 1, "beta-key": 2, "[REDACTED]__3": "literal", "gamma-key": 3}
    )
    assert out == {
        "[REDACTED]": 1,
        "[REDACTED]__2": 2,
        "[REDACTED]__3": "literal",
        "[REDACTED]__4": 3,
    }


def test_thousands_of_keys_redacting_alike_all_survive_in_order() -> None:
    secrets = [f"tok-{n:05d}-secret" for n in range(3000)]
    redactor = create_secret_redactor(secrets)
    out = redactor.redact({f"key:{secret}": n for n, secret in enumerate(secrets)})
    assert list(out.values()) == list(range(3000))
    assert list(out)[:3] == ["key:[REDACTED]", "key:[REDACTED]__2", "key:[REDACTED]__3"]
    assert list(out)[-1] == "key:[REDACTED]__3000"


def test_a_secret_given_as_a_str_subclass_is_looked_for_by_its_characters() -> None:
    class Masked(str):
        """A secret type that hides itself when printed."""

        def __str__(self) -> str:
            return "***"

        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            return b"***"

    secret = "it's-\u00fcn\u00efcode-key"
    redactor = create_secret_redactor([Masked(secret), Masked("other-key")])
    assert len(redactor) == 2
    assert redactor.redact(f"k={secret!a}") == 'k="[REDACTED]"'
    assert redactor.redact({"err": repr(secret.encode())}) == {"err": 'b"[REDACTED]"'}
    assert redactor.redact("rating: ***") == "rating: ***"


def test_repeated_and_empty_secrets_do_not_count_toward_the_limit() -> None:
    redactor = create_secret_redactor(["abc"] * 70_000 + [""] * 10)
    assert len(redactor) == 1
    assert redactor.redact("x abc y") == "x [REDACTED] y"


@pytest.mark.parametrize(
    ("secrets", "message"),
    [
        ([f"s{n}" for n in range(65_537)], "at most 65536 secrets are accepted"),
        (
            [f"\u00e9{n}" for n in range(40_000)],
            "40000 secrets make 160000 with the escaped spellings",
        ),
        (["\x01" * 20_000], "a secret is longer than 65536 bytes once escaped"),
        (["x" * 65_537], "a secret is longer than 65536 bytes"),
    ],
    ids=["too-many", "too-many-spelled", "too-long-spelled", "too-long"],
)
def test_a_refusal_by_the_secret_limits_says_what_counted(secrets: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        create_secret_redactor(secrets)


def test_a_redacted_key_colliding_with_an_existing_key_keeps_both() -> None:
    redactor = create_secret_redactor([SECRET])
    out = redactor.redact({"[REDACTED]": "existing", SECRET: "from secret"})
    assert sorted(out.values()) == ["existing", "from secret"]
    assert len(out) == 2


def test_dataclasses_are_redacted_and_keep_their_type() -> None:
    redactor = create_secret_redactor([SECRET])
    result = ToolResult(
        tool_call_id="call_1",
        name="fetch",
        value={"token": SECRET},
        content=[f"body {SECRET}"],
        error=ErrorInfo(message=f"bad {SECRET}", code="E_FETCH", name="FetchError"),
        metadata={"m": SECRET},
    )
    out = redactor.redact(result)
    assert type(out) is ToolResult
    assert type(out.error) is ErrorInfo
    assert out == ToolResult(
        tool_call_id="call_1",
        name="fetch",
        value={"token": REPLACEMENT},
        content=["body [REDACTED]"],
        error=ErrorInfo(message="bad [REDACTED]", code="E_FETCH", name="FetchError"),
        metadata={"m": REPLACEMENT},
    )


def test_an_error_info_alone_is_redacted() -> None:
    redactor = create_secret_redactor([SECRET])
    out = redactor.redact(ErrorInfo(message=f"denied {SECRET}", code=403, details={"k": SECRET}))
    assert out == ErrorInfo(message="denied [REDACTED]", code=403, details={"k": REPLACEMENT})


def test_the_input_is_never_mutated() -> None:
    redactor = create_secret_redactor([SECRET])
    inner = [SECRET, {"k": SECRET}]
    value: dict[str, Any] = {
        SECRET: inner,
        "set": {SECRET, "x"},
        "result": ToolResult(tool_call_id="c", name="t", value={"v": [SECRET]}),
    }
    before = copy.deepcopy(value)

    out = redactor.redact(value)

    assert value == before
    assert value["result"].value == {"v": [SECRET]}
    assert value[SECRET] is inner
    assert inner == [SECRET, {"k": SECRET}]
    assert not holds(out)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("nothing to see", id="str"),
        pytest.param({"a": [1, "b", {"c": None}], "d": ("e",)}, id="nested"),
        pytest.param(ToolResult(tool_call_id="c", name="t", value={"v": 1}), id="dataclass"),
        pytest.param({"sk-live": "4f2c9d"}, id="secret-split-across-key-and-value"),
        pytest.param(Opaque("harmless"), id="opaque"),
    ],
)
def test_the_same_object_comes_back_when_no_secret_is_present(value: Any) -> None:
    redactor = create_secret_redactor([SECRET])
    assert not redactor.contains_secret(value)
    assert redactor.redact(value) is value


def test_branches_without_a_secret_are_shared_not_copied() -> None:
    redactor = create_secret_redactor([SECRET])
    clean = {"big": list(range(10))}
    value = {"clean": clean, "dirty": [SECRET]}
    out = redactor.redact(value)
    assert out["clean"] is clean
    assert out["dirty"] == [REPLACEMENT]


@pytest.mark.parametrize("secrets", [["abc", "abcdef"], ["abcdef", "abc"]])
def test_overlapping_secrets_are_matched_longest_first(secrets: list[str]) -> None:
    redactor = create_secret_redactor(secrets)
    assert redactor.redact("xabcdefx abc") == "x[REDACTED]x [REDACTED]"


def test_a_custom_replacement_is_used() -> None:
    redactor = create_secret_redactor([SECRET], replacement="***")
    assert redactor.redact({"k": f"a{SECRET}b"}) == {"k": "a***b"}


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param('pa"ss', id="double-quote"),
        pytest.param("back\\slash", id="backslash"),
        pytest.param("line\nbreak", id="newline"),
        pytest.param("tab\there", id="tab"),
        pytest.param("ctl\x01\x1f", id="control-chars"),
        pytest.param("clé-ünïcødé", id="latin-unicode"),
        pytest.param("秘密🔑", id="cjk-emoji"),
        pytest.param('"\\\n', id="only-escapes"),
        pytest.param("</script>", id="slash"),
    ],
)
def test_secrets_needing_json_escapes_are_found_inside_nested_values(secret: str) -> None:
    redactor = create_secret_redactor([secret])
    value = {"outer": [{"inner": f"before {secret} after"}], f"key{secret}": 1}
    assert redactor.contains_secret(value)
    out = redactor.redact(value)
    assert out == {"outer": [{"inner": "before [REDACTED] after"}], "key[REDACTED]": 1}


def test_contains_secret_on_strings_and_values() -> None:
    redactor = create_secret_redactor([SECRET])
    assert redactor.contains_secret(f"x{SECRET}")
    assert not redactor.contains_secret("x")
    assert redactor.contains_secret({"k": (1, [SECRET])})
    assert not create_secret_redactor([]).contains_secret(SECRET)


# --- bounds: depth, cycles, opaque objects -----------------------------------------------------


def test_a_secret_below_max_depth_becomes_max_depth_marker() -> None:
    redactor = create_secret_redactor([SECRET])
    out = redactor.redact(nest(SECRET, 40))
    innermost, levels = unwrap(out)
    assert (innermost, levels) == ("[MaxDepth]", 32)


def test_max_depth_can_be_lowered() -> None:
    redactor = create_secret_redactor([SECRET], max_depth=3)
    out: Any = redactor.redact({"a": {"b": {"c": {"d": SECRET}}}})
    assert out == {"a": {"b": {"c": "[MaxDepth]"}}}


def test_a_deep_part_without_a_secret_is_kept_as_is() -> None:
    redactor = create_secret_redactor([SECRET])
    deep_clean = nest("clean", 40)
    out = redactor.redact([SECRET, deep_clean])
    assert out[0] == REPLACEMENT
    assert out[1] is deep_clean


def test_a_secret_just_above_max_depth_is_replaced_normally() -> None:
    redactor = create_secret_redactor([SECRET])
    innermost, levels = unwrap(redactor.redact(nest(SECRET, 31)))
    assert (innermost, levels) == (REPLACEMENT, 31)


@pytest.mark.parametrize("max_depth", [0, -1, 257, True, 2.5])
def test_max_depth_outside_1_to_256_is_rejected(max_depth: Any) -> None:
    with pytest.raises(ValueError, match="max_depth"):
        create_secret_redactor([SECRET], max_depth=max_depth)


def test_a_list_that_contains_itself_becomes_circular() -> None:
    redactor = create_secret_redactor([SECRET])
    cyclic: list[Any] = [SECRET]
    cyclic.append(cyclic)
    assert redactor.redact(cyclic) == [REPLACEMENT, "[Circular]"]
    assert cyclic[0] == SECRET
    assert cyclic[1] is cyclic


def test_a_dict_that_contains_itself_becomes_circular() -> None:
    redactor = create_secret_redactor([SECRET])
    cyclic: dict[str, Any] = {"token": SECRET}
    cyclic["self"] = cyclic
    assert redactor.redact(cyclic) == {"token": REPLACEMENT, "self": "[Circular]"}


def test_a_repeated_but_acyclic_reference_is_not_circular() -> None:
    redactor = create_secret_redactor([SECRET])
    shared = [SECRET]
    assert redactor.redact({"a": shared, "b": shared}) == {"a": [REPLACEMENT], "b": [REPLACEMENT]}


def test_an_opaque_object_whose_str_holds_a_secret_is_replaced_by_its_redacted_str() -> None:
    redactor = create_secret_redactor([SECRET])
    kept = Opaque("harmless")
    out: dict[str, Any] = redactor.redact({"leaky": Opaque(SECRET), "kept": kept})
    assert out["leaky"] == "Opaque([REDACTED])"
    assert out["kept"] is kept


def test_objects_that_cannot_be_printed_are_kept_as_values_and_as_keys() -> None:
    redactor = create_secret_redactor([SECRET])
    odd = Unprintable(SECRET)
    out: dict[Any, Any] = redactor.redact({"token": SECRET, "odd": odd, odd: "keyed by it"})
    assert out == {"token": REPLACEMENT, "odd": odd, odd: "keyed by it"}


# --- construction ------------------------------------------------------------------------------


def test_empty_secrets_are_ignored() -> None:
    assert len(create_secret_redactor(["", SECRET, ""])) == 1
    nothing = create_secret_redactor(["", ""])
    assert len(nothing) == 0
    value = {"k": "any text at all"}
    assert not nothing.contains_secret(value)
    assert nothing.redact(value) is value


def test_repeated_secrets_count_once() -> None:
    assert len(create_secret_redactor([SECRET, SECRET, "other"])) == 2


def test_secrets_may_come_from_any_iterable() -> None:
    redactor = create_secret_redactor(secret for secret in [SECRET])
    assert redactor.redact(SECRET) == REPLACEMENT


def test_a_single_string_as_secrets_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="single string"):
        create_secret_redactor(SECRET)


@pytest.mark.parametrize("bad", [42, None, b"bytes-secret", ("tuple",)])
def test_a_non_string_secret_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="secrets must be strings"):
        create_secret_redactor([SECRET, bad])


def test_a_non_string_replacement_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="replacement"):
        SecretRedactor([SECRET], replacement=None)  # type: ignore[arg-type]


def test_text_holding_lone_surrogates_is_redacted_and_keeps_its_surrogates() -> None:
    # A JSON decoder turns a model's "\ud800" into a lone surrogate, which UTF-8 cannot carry.
    redactor = create_secret_redactor([SECRET])
    value = {"k\ud800" + SECRET: ["\udfff" + SECRET + "\udc80", "clean\ud800"]}

    assert redactor.contains_secret(value)
    assert redactor.redact(value) == {
        "k\ud800" + REPLACEMENT: ["\udfff" + REPLACEMENT + "\udc80", "clean\ud800"]
    }
    clean = {"clean\ud800": "\udfff"}
    assert redactor.redact(clean) is clean


def test_a_secret_holding_a_lone_surrogate_is_matched_where_it_stands() -> None:
    # os.environ gives a value that is not UTF-8 as text with surrogates ("surrogateescape").
    secret = "tok\udcff\udc80en"
    redactor = create_secret_redactor([secret, "plain-secret"])

    assert redactor.redact(f"a {secret} b plain-secret") == f"a {REPLACEMENT} b {REPLACEMENT}"
    assert redactor.redact({"k": [secret]}) == {"k": [REPLACEMENT]}
    assert redactor.redact("tok\udcffen") == "tok\udcffen"
    assert not redactor.contains_secret("tok en")


def test_a_replacement_holding_a_lone_surrogate_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        create_secret_redactor([SECRET], replacement="\ud800")


def test_repr_never_shows_a_secret() -> None:
    redactor = create_secret_redactor([SECRET, "pw-other"])
    for text in (repr(redactor), str(redactor), f"{redactor!r}"):
        assert SECRET not in text
        assert "pw-other" not in text
    assert "2" in repr(redactor)


# --- ledger records ----------------------------------------------------------------------------


def ledger_record_full_of_secrets() -> ToolCallRecord:
    return ToolCallRecord(
        id="toolcall_1",
        session_id="s1",
        run_id="r1",
        tool_call_id="call_1",
        name=f"tool-{SECRET}",
        arguments={"password": SECRET, SECRET: [SECRET]},
        status="blocked",
        started_at="2026-01-01T00:00:00.000Z",
        entry_id=f"entry-{SECRET}",
        finished_at="2026-01-01T00:00:00.001Z",
        result=ToolResult(
            tool_call_id="call_1",
            name="tool",
            value=SECRET,
            error=ErrorInfo(message=f"denied {SECRET}"),
        ),
        reason=f"because {SECRET}",
        progress={"step": SECRET},
        progress_metadata={"note": SECRET},
        progress_at="2026-01-01T00:00:00.000Z",
        metadata={"m": (SECRET,)},
    )


def test_redact_run_ledger_record_scrubs_every_field_and_marks_it_redacted() -> None:
    record = ledger_record_full_of_secrets()
    before = copy.deepcopy(record)

    out = redact_run_ledger_record(record, create_secret_redactor([SECRET]))

    assert type(out) is ToolCallRecord
    assert out.redacted is True
    assert not holds(out)
    assert SECRET not in _json.dumps_lenient(out.to_dict()).decode()
    assert out.name == "tool-[REDACTED]"
    assert out.arguments == {"password": REPLACEMENT, REPLACEMENT: [REPLACEMENT]}
    assert out.result is not None
    assert out.result.error == ErrorInfo(message="denied [REDACTED]")
    assert out.reason == "because [REDACTED]"
    assert (out.id, out.status, out.started_at) == (record.id, record.status, record.started_at)
    assert record == before, "the input record is untouched"
    assert record.redacted is False


def test_redact_run_ledger_record_refuses_a_stranger_for_either_argument() -> None:
    record = ledger_record_full_of_secrets()
    with pytest.raises(TypeError, match="record must be a ToolCallRecord, got dict"):
        redact_run_ledger_record(record.to_dict(), create_secret_redactor([SECRET]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="redactor must be a redactor with a redact"):
        redact_run_ledger_record(record, [SECRET])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("secrets", "expected"),
    [
        (5, "secrets must be a collection of strings, got int"),
        ("hunter2", "secrets must be a collection of strings, not a single string"),
        ([SECRET, 7], "secrets must be strings, got int"),
        ([[SECRET]], "secrets must be strings, got list"),
    ],
)
def test_secrets_that_are_not_a_collection_of_strings_are_refused_naming_them(
    secrets: Any, expected: str
) -> None:
    from prism_tools.redaction import effective_redactor

    with pytest.raises(TypeError, match=re.escape(expected)):
        create_secret_redactor(secrets)
    with pytest.raises(TypeError, match=re.escape(expected)):
        effective_redactor(secrets, None)


def test_redact_run_ledger_record_marks_a_clean_record_redacted_too() -> None:
    record = ToolCallRecord(
        id="toolcall_1",
        session_id="s1",
        run_id="r1",
        tool_call_id="call_1",
        name="echo",
        arguments={"text": "hi"},
        status="started",
        started_at="2026-01-01T00:00:00.000Z",
    )
    out = redact_run_ledger_record(record, create_secret_redactor([SECRET]))
    assert out == dataclasses.replace(record, redacted=True)


def test_redact_run_ledger_record_without_a_redactor_returns_the_record() -> None:
    record = ledger_record_full_of_secrets()
    assert redact_run_ledger_record(record, None) is record


# --- known gaps: each of these lets a secret out -----------------------------------------------


def test_a_secret_nested_deeper_than_the_json_writer_allows_is_still_redacted() -> None:
    """orjson refuses more than 254 levels; the redactor's pre-check must not then miss the
    secret, and the walk must cut the deep part to ``[MaxDepth]``."""
    redactor = create_secret_redactor([SECRET])
    value = nest(SECRET, 300)
    assert redactor.contains_secret(value)
    innermost, levels = unwrap(redactor.redact(value))
    assert (innermost, levels) == ("[MaxDepth]", 32)


def test_a_secret_deep_in_a_value_that_also_holds_a_huge_int_is_still_redacted() -> None:
    """An int beyond 64 bits sends the pre-check to its fallback writer, which stops at 200
    levels; a secret below that must still be found."""
    redactor = create_secret_redactor([SECRET])
    value = {"big": 2**70, "deep": nest(SECRET, 210)}
    out = redactor.redact(value)
    assert not holds(out)


def test_a_secret_inside_a_mapping_that_is_not_a_dict_is_redacted() -> None:
    """``ToolResult.metadata`` is typed ``Mapping``; the walk handles any Mapping, so a secret
    in one must not slip past the pre-check."""
    redactor = create_secret_redactor([SECRET])
    result = ToolResult(tool_call_id="c", name="t", metadata=HiddenMapping({"token": SECRET}))
    out = redactor.redact(result)
    assert out.metadata is not None
    assert dict(out.metadata) == {"token": REPLACEMENT}


@dataclasses.dataclass
class HttpResponse:
    """A tool output whose headers are filled in after construction (``init=False``)."""

    body: str
    headers: dict[str, str] = dataclasses.field(init=False, default_factory=dict)


def test_a_secret_in_a_dataclass_field_outside_init_is_redacted() -> None:
    redactor = create_secret_redactor([SECRET])
    response = HttpResponse(body="ok")
    response.headers["authorization"] = f"Bearer {SECRET}"
    out = redactor.redact(response)
    assert not holds(out), f"secret left in {out!r}"


# --- values the JSON writer reads its own way --------------------------------------------------


class Color(enum.Enum):
    KEY = SECRET


class Credentials:
    def to_dict(self) -> dict[str, Any]:
        return {"api_key": SECRET}


@dataclasses.dataclass
class Private:
    host: str
    _token: str


@dataclasses.dataclass
class Derived:
    user: str

    def __post_init__(self) -> None:
        self.header = f"Bearer {SECRET}"  # not a field: set after __init__


@dataclasses.dataclass
class Salted:
    value: str
    salt: dataclasses.InitVar[str]


@dataclasses.dataclass(init=False)
class OwnInit:
    dsn: str

    def __init__(self, host: str) -> None:
        self.dsn = f"postgres://u:{SECRET}@{host}/db"


class Labels(set[str]):
    def __init__(self, items: Iterator[str], source: str) -> None:
        super().__init__(items)
        self.source = source


class Pair(NamedTuple):
    name: str
    key: str


PEM = "-----BEGIN KEY-----\nMIIEv'Q\"\\x\n-----END KEY-----"
NON_ASCII = "pässwörd-42"


@pytest.mark.parametrize(
    "value",
    [
        {"color": Color.KEY},
        {"creds": Credentials()},
        Derived("bob"),
        Salted(SECRET, salt="x"),
        OwnInit("h"),
        Labels(iter(["prod", SECRET]), "ops"),
        [Pair("svc", SECRET)],
        collections.deque([SECRET]),
        {("k", SECRET): 1},
    ],
    ids=[
        "enum",
        "to_dict",
        "post-init-attribute",
        "init-var",
        "own-init",
        "set-subclass",
        "named-tuple",
        "deque",
        "tuple-key",
    ],
)
def test_what_the_json_writer_would_write_of_a_value_holds_no_secret(value: Any) -> None:
    """The scan, the walk and the writer read a value the same way: a secret the writer would
    put in an event or row never stays, and redacting never raises."""
    assert SECRET in _json.dumps_lenient(value).decode() + repr(value) + str(
        instance_attributes(value) if dataclasses.is_dataclass(value) else ""
    )
    redactor = create_secret_redactor([SECRET])
    out = redactor.redact(value)
    written = _json.dumps_lenient(out).decode()
    assert SECRET not in written
    assert SECRET not in repr(out)
    if dataclasses.is_dataclass(out):
        assert SECRET not in repr(instance_attributes(out))
    assert REPLACEMENT in written + repr(out)


def test_a_private_dataclass_field_is_never_written_and_is_redacted_with_the_rest() -> None:
    # The JSON writer of events and rows skips _private attributes, and so does the scan that
    # keeps redaction cheap: a secret held only there is never written, and is not looked for.
    only_private = Private("db", SECRET)
    assert SECRET not in _json.dumps_lenient(only_private).decode()
    redactor = create_secret_redactor([SECRET])
    assert redactor.redact(only_private) is only_private
    # Once a secret shows elsewhere the walk runs, and it reaches the private field too.
    both = redactor.redact(Private(SECRET, SECRET))
    assert both == Private(REPLACEMENT, REPLACEMENT)


def test_a_set_subclass_keeps_its_other_members() -> None:
    out = create_secret_redactor([SECRET]).redact(Labels(iter(["prod", SECRET]), "ops"))
    assert out == {"prod", REPLACEMENT}


def test_a_named_tuple_keeps_its_kind_and_a_dataclass_copy_its_class() -> None:
    redactor = create_secret_redactor([SECRET])
    pair = redactor.redact(Pair("svc", SECRET))
    assert pair == Pair("svc", REPLACEMENT)
    assert type(pair) is Pair
    private = redactor.redact(Private(SECRET, "x"))
    assert private == Private(REPLACEMENT, "x")
    assert type(private) is Private


@pytest.mark.parametrize("secret", [PEM, NON_ASCII, 'it\'s "quoted"', "tab\there"])
@pytest.mark.parametrize(
    "printed",
    [
        repr,
        str,
        ascii,
        lambda secret: str([secret]),
        lambda secret: str(collections.deque([secret])),
        lambda secret: str(secret.encode()),
        lambda secret: str(KeyError(secret)),
        lambda secret: _json.dumps_lenient({"k": secret}).decode(),
        lambda secret: json.dumps({"k": secret}),
    ],
    ids=["repr", "str", "ascii", "list", "deque", "bytes", "key-error", "orjson", "json"],
)
def test_a_secret_is_found_as_python_and_json_print_it(
    secret: str, printed: Callable[[str], str]
) -> None:
    text = printed(secret)
    redactor = create_secret_redactor([secret])
    assert redactor.contains_secret(text)
    out = redactor.redact_text(text)
    assert REPLACEMENT in out
    for spelled in {secret, *secret_spellings(secret)}:
        assert spelled not in out


@given(
    secret=any_text(min_size=4, max_size=12).filter(lambda text: "\\" not in text),
    escaped=st.lists(st.booleans(), min_size=12, max_size=12),
    cut=st.integers(min_value=0, max_value=40),
)
def test_raw_json_text_is_redacted_however_the_model_escaped_the_secret(
    secret: str, escaped: list[bool], cut: int
) -> None:
    # Each character of the secret written as itself or as a \uXXXX escape (a pair for astral
    # characters), as a model may choose; the text may also be cut short anywhere.
    body = "".join(
        "".join(f"\\u{unit:04x}" for unit in _utf16_units(char)) if escape else char
        for char, escape in zip(secret, escaped, strict=False)
    ).replace('"', '\\"')
    text = f'{{"password": "{body}", "n": 1}}'
    text = text[: len(text) - cut]
    redactor = create_secret_redactor([secret])
    # What a ledger row keeps: the literals redacted, then the text as any string is.
    out = redactor.redact_text(redact_json_text(text, redactor))
    assert secret not in out
    assert all(secret not in body for body in _literal_bodies(out))


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[at : at + 2], "little") for at in range(0, len(data), 2)]


def _literal_bodies(text: str) -> Iterator[str]:
    """Every string literal of ``text`` decoded as JSON would (an unterminated one too)."""
    for literal in re.findall(r'"(?:[^"\\]|\\.)*"?', text):
        closed = literal if literal.endswith('"') and len(literal) > 1 else literal + '"'
        with contextlib.suppress(ValueError):
            yield json.loads(closed)


# --- properties --------------------------------------------------------------------------------

# For "the secret appears nowhere in the JSON text" to be a sound check, the secret must not be
# formable from text the redactor itself writes or from JSON syntax around strings:
#  - it shares no character with the replacement, so it cannot be re-formed across a
#    replacement (this also excludes every substring of "[REDACTED]");
#  - it has no '"', '\\', '_' or control character, so it cannot straddle a string boundary,
#    an escape sequence, or a "__2" key suffix;
#  - it has at least one character that JSON only ever writes inside a string.
# Then any occurrence in the JSON text lies inside one output string, between replacements.
_NON_STRING_JSON_CHARS = frozenset("{}[],:0123456789-+.eE") | frozenset("truefalsn")
_NOT_IN_JSON_CHECKED_SECRETS = "".join(sorted(set(REPLACEMENT) | set('"\\_')))

json_checkable_secrets = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs", "Cc"), blacklist_characters=_NOT_IN_JSON_CHECKED_SECRETS
    ),
    min_size=1,
    max_size=12,
).filter(lambda secret: bool(set(secret) - _NON_STRING_JSON_CHARS))

unescaped_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'),
    max_size=8,
)


def json_like_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        strings,
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.tuples(children, children),
            st.dictionaries(strings, children, max_size=4),
        ),
        max_leaves=20,
    )


def values_embedding(secret: str, filler: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """JSON-like values whose strings and keys sometimes contain ``secret``; at least one
    key or string always does."""
    with_secret = st.builds(lambda before, after: before + secret + after, filler, filler)
    strings = st.one_of(filler, with_secret)
    tree = json_like_values(strings)
    return st.one_of(
        st.builds(lambda key, item: {key: item}, with_secret, tree),
        st.builds(lambda item, text: [item, text], tree, with_secret),
    )


@given(
    st.data(),
    json_checkable_secrets,
)
def test_property_no_secret_survives_in_the_json_text(data: st.DataObject, secret: str) -> None:
    value = data.draw(values_embedding(secret, unescaped_text), label="value")
    before = copy.deepcopy(value)
    redactor = create_secret_redactor([secret])

    assert redactor.contains_secret(value)
    out = redactor.redact(value)

    assert secret not in _json.dumps_lenient(out).decode()
    assert value == before


def _replacement_disjoint_from(secret: str) -> str | None:
    for candidate in (REPLACEMENT, "\u2588", "#", "*", "~", "?"):
        if not set(candidate) & set(secret):
            return candidate
    return None


@given(
    st.data(),
    any_text(min_size=1, max_size=12).filter(
        lambda secret: "_" not in secret and not set(secret) <= set("0123456789")
    ),
)
def test_property_no_string_or_key_keeps_the_secret(data: st.DataObject, secret: str) -> None:
    """Any text secret, including quotes, backslashes, newlines, control characters and lone
    surrogates, in values whose other text is arbitrary too. The replacement shares no
    character with the secret, so it cannot re-form it."""
    replacement = _replacement_disjoint_from(secret)
    assume(replacement is not None)
    assert replacement is not None
    filler = any_text(max_size=8)
    value = data.draw(
        st.one_of(
            values_embedding(secret, filler),
            st.builds(
                lambda item, members: [item, members],
                values_embedding(secret, filler),
                st.frozensets(filler, max_size=3),
            ),
        ),
        label="value",
    )
    before = copy.deepcopy(value)
    redactor = create_secret_redactor([secret], replacement=replacement)

    assert redactor.contains_secret(value), "the JSON pre-check must see every embedded secret"
    out = redactor.redact(value)

    leftovers = [text for text in all_strings(out) if secret in text]
    assert leftovers == []
    assert value == before


@given(st.data(), any_text(min_size=1, max_size=12))
def test_property_values_without_the_secret_come_back_identical(
    data: st.DataObject, secret: str
) -> None:
    value = data.draw(json_like_values(any_text(max_size=8)), label="value")
    assume(not any(holds(value, spelled) for spelled in {secret, *secret_spellings(secret)}))
    redactor = create_secret_redactor([secret])
    assert redactor.redact(value) is value


@dataclasses.dataclass
class WithToDict:
    """A dataclass whose to_dict() writes more than its fields (the writer calls it)."""

    user: str

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "token": SECRET}


def test_a_value_is_read_through_its_to_dict_before_anything_else() -> None:
    redactor = create_secret_redactor([SECRET])
    out = redactor.redact({"k": WithToDict("bob"), "secret": SECRET})
    written = _json.dumps_lenient(types_to_plain(out)).decode()
    assert SECRET not in written
    assert out["k"] == {"user": "bob", "token": REPLACEMENT}


def test_a_rebuilt_value_a_scan_cannot_read_leaves_as_its_plain_form() -> None:
    @dataclasses.dataclass
    class Signed:
        url: str
        extra: Any

        def __post_init__(self) -> None:
            self.url = f"https://api/x?key={SECRET}"  # derived again on every rebuild

    redactor = create_secret_redactor([SECRET])
    for extra in (2**70, "caf\udce9"):  # orjson cannot write either: the re-scan cannot decide
        out = redactor.redact(Signed("x", extra))
        assert SECRET not in _json.dumps_lenient(out).decode()
        assert SECRET not in repr(out)


def test_a_secret_with_a_quote_is_found_where_repr_quotes_it_beside_a_double_quote() -> None:
    secret = "pa'ss-w0rd"
    redactor = create_secret_redactor([secret])
    for text in (repr(f'login "admin" failed for {secret}'), str([secret, '"'])):
        assert REPLACEMENT in redactor.redact_text(text)
    printed = str(f'x"{secret}'.encode())
    assert "pa\\'ss" in printed
    assert "pa\\'ss" not in redactor.redact_text(printed)


def test_escaped_secrets_in_text_whose_quotes_do_not_pair_are_still_redacted() -> None:
    redactor = create_secret_redactor([SECRET])
    escaped = SECRET.replace("-", "\\u002d")
    text = f'{{"a": "oops, "k": "{escaped}"}}'  # one quote missing before the secret
    out = redactor.redact_text(redact_json_text(text, redactor))
    assert SECRET not in out
    assert escaped not in out
    assert REPLACEMENT in out


def test_a_to_dict_returning_its_own_object_leaves_the_value_as_it_is() -> None:
    class Loop:
        def to_dict(self) -> Any:
            return self

    value = Loop()
    out = create_secret_redactor([SECRET]).redact([value, SECRET])
    assert out[0] is value
