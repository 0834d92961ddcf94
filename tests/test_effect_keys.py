"""Canonical JSON, argument hashes and effect keys against JavaScript's rules.

Expected strings are written by hand from how ``JSON.stringify`` prints values; the digests at
the bottom were produced by a Node.js run of the reference algorithm and are checked here
byte for byte.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism_tools.effects import (
    ERR_TOOL_EFFECT_LIMIT,
    KEY_PREFIX,
    ToolEffectError,
    ToolEffectKey,
    arguments_hash,
    canonical_json,
    effect_key,
)
from prism_tools.identity import AgentIdentity, Ownership


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (-1.0, "-1"),
        (0.0, "0"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (-1.5, "-1.5"),
        (100, "100"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e21, "1.5e+21"),
        (123e-20, "1.23e-18"),
        (1e-6, "0.000001"),
        (1.5e-6, "0.0000015"),
        (1e-7, "1e-7"),
        (2.5e-7, "2.5e-7"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (123456.789, "123456.789"),
        (2**53, "9007199254740992"),
        (-(2**53), "-9007199254740992"),
        (2**53 + 1, "9007199254740992"),
        (123456789012345678901234567890, "1.2345678901234568e+29"),
        (10**21, "1e+21"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
    ],
)
def test_numbers_and_literals_print_like_javascript(value: Any, expected: str) -> None:
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", '"plain"'),
        ("héllo wörld", '"héllo wörld"'),
        ("日本語 😀", '"日本語 😀"'),
        ('quote " and \\ back', '"quote \\" and \\\\ back"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\x00\x01\x1f", '"\\u0000\\u0001\\u001f"'),
        ("\x7f\u2028\u2029", '"\x7f\u2028\u2029"'),
        ("/", '"/"'),
        ("\ud800", '"\\ud800"'),
        ("a\udfffb", '"a\\udfffb"'),
        ("\ud83d\ude00", '"😀"'),
        ("\ude00\ud83d", '"\\ude00\\ud83d"'),
    ],
)
def test_strings_escape_like_javascript(value: str, expected: str) -> None:
    assert canonical_json(value) == expected


def test_objects_sort_keys_and_keep_arrays() -> None:
    value = {"b": 1, "a": [3, 1, {"z": None, "y": [True]}], "A": {}, "": []}
    assert canonical_json(value) == '{"":[],"A":{},"a":[3,1,{"y":[true],"z":null}],"b":1}'


def test_keys_sort_by_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00, which sorts before U+FFFF in UTF-16 order
    # although its code point is larger; U+E000 sorts after the surrogates.
    value = {"\uffff": 1, "\U0001f600": 2, "\ue000": 3, "z": 4, "é": 5}
    assert canonical_json(value) == '{"z":4,"é":5,"😀":2,"\ue000":3,"\uffff":1}'
    nested = {"k": {"\uffff": [], "\U0001f600": {}}}
    assert canonical_json(nested) == '{"k":{"😀":{},"\uffff":[]}}'


def test_array_index_keys_come_first_like_a_javascript_object() -> None:
    value = {"b": 1, "10": 2, "2": 3, "a": 4, "01": 5, "-1": 6, "4294967295": 7, "4294967294": 8}
    assert canonical_json(value) == (
        '{"2":3,"10":2,"4294967294":8,"-1":6,"01":5,"4294967295":7,"a":4,"b":1}'
    )


def test_a_proto_key_is_dropped_but_still_checked() -> None:
    assert canonical_json({"__proto__": {"x": 1}, "a": 1}) == '{"a":1}'
    with pytest.raises(ToolEffectError):
        canonical_json({"__proto__": float("nan")})


class Thing:
    pass


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        10**400,
        {1, 2},
        frozenset(),
        (1, 2),
        b"bytes",
        Thing(),
        Decimal("1.5"),
        OrderedDict(a=1),
        {1: "int key"},
        {"ok": [1, {"deep": float("nan")}]},
        [Thing()],
    ],
)
def test_non_json_values_are_refused(value: Any) -> None:
    with pytest.raises(ToolEffectError) as info:
        canonical_json(value)
    assert info.value.code == ERR_TOOL_EFFECT_LIMIT
    assert str(info.value) == "tool effect values must be JSON"


def test_cycles_are_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ToolEffectError):
        canonical_json(loop)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_is_stable_and_order_free(value: Any) -> None:
    text = canonical_json(value)
    assert canonical_json(value) == text
    if isinstance(value, dict):
        reversed_value = dict(reversed(list(value.items())))
        assert canonical_json(reversed_value) == text
    text.encode("utf-8")  # always encodable: lone surrogates are escaped


def reference_canonical_json(value: Any) -> str:
    """The first, direct transcription of the rules (one code path for every value), kept to
    check the optimised writer against."""

    def string(text: str) -> str:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        out = []
        for char in text:
            if char in '"\\':
                out.append("\\" + char)
            elif char in "\b\f\n\r\t":
                out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
            elif ord(char) < 0x20 or 0xD800 <= ord(char) <= 0xDFFF:
                out.append(f"\\u{ord(char):04x}")
            else:
                out.append(char)
        return '"' + "".join(out) + '"'

    def utf16(text: str) -> bytes:
        paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return paired.encode("utf-16-be", "surrogatepass")

    def write(item: Any) -> str:
        if item is None or type(item) is bool:
            return {None: "null", True: "true", False: "false"}[item]
        if type(item) in (int, float):
            return canonical_json(item)  # numbers are checked on their own above
        if type(item) is str:
            return string(item)
        if type(item) is list:
            return "[" + ",".join(write(inner) for inner in item) + "]"
        assert type(item) is dict
        indices = sorted(
            (int(key), key)
            for key in item
            if key.isascii()
            and key.isdigit()
            and (key == "0" or key[0] != "0")
            and int(key) <= 2**32 - 2
        )
        index_keys = {key for _n, key in indices}
        names = sorted((k for k in item if k not in index_keys and k != "__proto__"), key=utf16)
        ordered = [key for _n, key in indices] + names
        return "{" + ",".join(string(key) + ":" + write(item[key]) for key in ordered) + "}"

    return write(value)


tricky_text = st.text() | st.sampled_from(
    [
        "0",
        "1",
        "01",
        "10",
        "-1",
        "4294967294",
        "4294967295",
        "__proto__",
        "\ud800",
        "\ud83d\ude00",
        "\ude00\ud83d",
        "\uffff",
        "\ue000",
        "é",
        "\x00\x1f\x7f",
        '"\\',
        "\u2028",
        "",
    ]
)
tricky_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | tricky_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky_text, inner, max_size=5),
    max_leaves=25,
)


@given(tricky_values)
def test_canonical_json_matches_the_reference_transcription(value: Any) -> None:
    assert canonical_json(value) == reference_canonical_json(value)


ARGS = {
    "to": "a@example.com",
    "body": "héllo 😀",
    "n": [1.5, 1e21, -0.0],
    "z": {"b": True, "a": None},
}
ARGS_TEXT = '{"body":"héllo 😀","n":[1.5,1e+21,0],"to":"a@example.com","z":{"a":null,"b":true}}'
ARGS_HASH = "626da13a7e1dce58075fe001e4fc064a3a9f2cc18f58a83e2e6de56144e08d21"
IDENTITY = AgentIdentity("agent-1", "t1", account_id="a1", user_id="u1")


def test_arguments_hash() -> None:
    assert canonical_json(ARGS) == ARGS_TEXT
    assert arguments_hash(ARGS) == hashlib.sha256(ARGS_TEXT.encode()).hexdigest() == ARGS_HASH
    assert arguments_hash({}) == hashlib.sha256(b"{}").hexdigest()
    assert arguments_hash({"b": 1, "a": 2}) == arguments_hash({"a": 2, "b": 1})
    assert arguments_hash({"a": 1}) != arguments_hash({"a": 2})


def test_effect_key_golden() -> None:
    material = (
        '{"accountId":"a1","argumentsHash":"' + ARGS_HASH + '","principalId":"agent-1",'
        '"runId":"run-1","sessionId":"session-1","tenantId":"t1","toolCallId":"call-1",'
        '"toolName":"send_email","userId":"u1"}'
    )
    expected = KEY_PREFIX + hashlib.sha256(material.encode()).hexdigest()
    key = effect_key(
        IDENTITY,
        session_id="session-1",
        run_id="run-1",
        tool_call_id="call-1",
        tool_name="send_email",
        arguments_hash=ARGS_HASH,
    )
    assert key == expected
    assert key == (
        "prism:tool-effect:v1:8cc7c88a2967a2ba140cec8c10454f8fb55a33fe45eb098db0a459ee6c8ec284"
    )
    assert len(key.encode()) == 85


def test_effect_key_with_absent_account_and_user_uses_null() -> None:
    empty_hash = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert arguments_hash({}) == empty_hash
    key = effect_key(
        AgentIdentity("p", "t1"),
        session_id="s",
        run_id="r",
        tool_call_id="c",
        tool_name="t",
        arguments_hash=empty_hash,
    )
    assert key == (
        "prism:tool-effect:v1:28e240cbf9d9e996eecc3391859ffc839d3c6503816fd4e0bdac71f796c6d8b7"
    )


def test_every_field_changes_the_key() -> None:
    base = {
        "session_id": "s",
        "run_id": "r",
        "tool_call_id": "c",
        "tool_name": "t",
        "arguments_hash": ARGS_HASH,
    }
    keys = {effect_key(IDENTITY, **base)}
    for field in base:
        changed = dict(base, **{field: "0" * 64 if field == "arguments_hash" else "other"})
        keys.add(effect_key(IDENTITY, **changed))
    for identity in (
        AgentIdentity("agent-2", "t1", "a1", "u1"),
        AgentIdentity("agent-1", "t2", "a1", "u1"),
        AgentIdentity("agent-1", "t1", None, "u1"),
        AgentIdentity("agent-1", "t1", "a1", None),
    ):
        keys.add(effect_key(identity, **base))
    assert len(keys) == 10


def test_derive_builds_a_complete_key() -> None:
    derived = ToolEffectKey.derive(
        IDENTITY,
        None,
        session_id="session-1",
        run_id="run-1",
        tool_call_id="call-1",
        tool_name="send_email",
        arguments=ARGS,
    )
    assert derived.arguments_hash == ARGS_HASH
    assert derived.ownership == Ownership("t1", "a1", "u1")
    assert derived.key == (
        "prism:tool-effect:v1:8cc7c88a2967a2ba140cec8c10454f8fb55a33fe45eb098db0a459ee6c8ec284"
    )


@given(
    st.lists(st.none() | tricky_text | st.integers(-5, 5), min_size=9, max_size=9),
)
def test_effect_key_is_the_hash_of_the_canonical_material(values: list[Any]) -> None:
    names = (
        "accountId", "argumentsHash", "principalId", "runId", "sessionId", "tenantId",
        "toolCallId", "toolName", "userId",
    )  # fmt: skip
    material = dict(zip(names, values, strict=True))
    account, digest, principal, run, session, tenant, call, tool, user = values
    key = effect_key(
        AgentIdentity(principal, tenant, account_id=account, user_id=user),
        session_id=session,
        run_id=run,
        tool_call_id=call,
        tool_name=tool,
        arguments_hash=digest,
    )
    text = reference_canonical_json(material)
    assert key == KEY_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()
