"""BFCL function parameters to JSON Schema, and BFCL ground truth to call arguments.

BFCL (the Berkeley Function Calling Leaderboard) writes its ``parameters`` in a JSON-Schema-like
dialect with Python, Java and JavaScript type names. ``normalise`` rewrites one parameter schema
into draft 2020-12 JSON Schema. It never changes the input; it returns a new schema.

Rules:

1. ``type`` names are mapped by ``TYPE_NAMES``:

   - Python: ``dict`` -> ``object``, ``float`` -> ``number``, ``tuple`` -> ``array``
     (JSON has no tuples; the argument arrives as an array), ``any`` -> no ``type`` at all.
   - Java and JavaScript: ``String``/``char``/``Character`` -> ``string``; ``Boolean`` ->
     ``boolean``; ``Array``/``ArrayList``/``List`` -> ``array``; ``HashMap``/``Map`` ->
     ``object``; ``long``/``Long``/``int``/``Integer``/``short``/``Short``/``byte``/``Byte`` ->
     ``integer``; ``double``/``Double``/``Float`` -> ``number``. (The data uses ``String``,
     ``Boolean``, ``Array``, ``ArrayList``, ``HashMap``, ``long``, ``double`` and ``char``; the
     other names are their siblings, mapped the same way so that the table is complete.)
   - The empty type name ``""`` (it occurs once) says nothing, like ``any``: no ``type``.
   - The seven JSON Schema names stay as they are. Any other name raises ``ValueError``, so new
     data with a new name fails loudly instead of validating loosely.
   - A list of type names is mapped name by name; if one of them is unconstrained, the whole
     ``type`` is dropped.

2. ``optional`` is dropped wherever it appears. It is not JSON Schema: BFCL uses it both on a
   property (``"optional": true``, sometimes the strings ``"true"``/``"True"``/``"yes"``) and on
   an object as a list of property names. ``required`` alone decides what must be present, as it
   does in BFCL's own checker; ``required`` is kept exactly as published (one property in the
   ``irrelevance`` category is both required and marked optional; it stays required).

3. An ``enum`` beside ``"type": "array"`` whose members are not arrays (22 subschemas, e.g.
   ``"metrics": {"type": "array", "items": {"type": "string"}, "enum": ["temperature", ...]}``)
   lists the allowed *items*: as published it could only match an array equal to one of the
   strings, which is impossible, so every non-empty argument would be rejected. It moves into
   ``items`` (unless ``items`` already has an ``enum``).

4. Everything else is kept as published: ``description``, ``default`` (an annotation, even when
   it does not match the type or lies outside the ``enum``), ``enum``, ``format`` (an annotation;
   format assertion is off), ``maximum``, ``minItems``/``maxItems`` (also where they sit beside a
   non-array type, where JSON Schema ignores them). That includes the 114 subschemas whose
   ``enum`` contradicts their ``type`` (``"type": "boolean"`` with ``"enum": ["True", "False",
   "dontcare"]``, 70; ``"type": "integer"`` with an enum of strings, 44): which side is meant is
   a guess, so they stay unsatisfiable, and only omitting the argument passes them.

The rules are applied to every subschema: ``properties`` values, ``items`` (a schema or a list of
schemas), ``additionalProperties``, ``anyOf``/``oneOf``/``allOf``, ``not`` and ``$defs``. Values
of ``enum``, ``const``, ``default`` and ``examples`` are data, never rewritten.

Ground truth (``answers.jsonl``) gives, per call, ``{function: {argument: [options...]}}``: a list
of acceptable values per argument, where ``""`` means "may be omitted", and a dict argument
repeats the same pattern inside (each of its members is again a list of options), also for dicts
inside lists. ``first_choice`` builds the arguments a model would send by taking the first option
that is not ``""`` for every argument, recursively; an argument with no other option (only
``""``, or an empty list of options, which the data also has) is left out. ``options`` lists
every acceptable value of one argument (``OMIT`` for ``""``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

JSON_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})

TYPE_NAMES: Final[Mapping[str, str | None]] = {
    # Python names
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": None,
    "": None,
    # Java and JavaScript names
    "String": "string",
    "char": "string",
    "Character": "string",
    "Boolean": "boolean",
    "Array": "array",
    "ArrayList": "array",
    "List": "array",
    "HashMap": "object",
    "Map": "object",
    "long": "integer",
    "Long": "integer",
    "int": "integer",
    "Integer": "integer",
    "short": "integer",
    "Short": "integer",
    "byte": "integer",
    "Byte": "integer",
    "double": "number",
    "Double": "number",
    "Float": "number",
}
"""Non-standard type names and their JSON Schema type; ``None`` means no type constraint."""

DROPPED_KEYWORDS: Final = frozenset({"optional"})

# Where a subschema can sit.
_ONE_SCHEMA: Final = frozenset({"additionalProperties", "items", "not", "contains"})
_SCHEMA_LISTS: Final = frozenset({"anyOf", "oneOf", "allOf", "items", "prefixItems"})
_SCHEMA_MAPS: Final = frozenset({"properties", "$defs", "definitions", "patternProperties"})


class _Omit:
    """The ``""`` option: the argument may be left out."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()


def json_type(name: object) -> str | None:
    """The JSON Schema type for one BFCL type name; ``None`` for no constraint."""
    if not isinstance(name, str):
        raise ValueError(f"type name must be a string, got {name!r}")
    if name in JSON_TYPES:
        return name
    if name in TYPE_NAMES:
        return TYPE_NAMES[name]
    raise ValueError(f"unknown BFCL type name {name!r}")


def _normalise_type(value: object) -> str | list[str] | None:
    if isinstance(value, list):
        mapped = [json_type(name) for name in value]
        if any(name is None for name in mapped):
            return None
        return list(dict.fromkeys(name for name in mapped if name is not None))
    return json_type(value)


def normalise(schema: Any) -> Any:
    """A new draft 2020-12 schema from one BFCL parameter schema (see the module doc)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in DROPPED_KEYWORDS:
            continue
        if key == "type":
            mapped = _normalise_type(value)
            if mapped is not None:
                out[key] = mapped
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: normalise(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [normalise(sub) for sub in value]
        elif key in _ONE_SCHEMA:
            out[key] = normalise(value)
        else:
            out[key] = value
    return _enum_to_items(out)


def _enum_to_items(schema: dict[str, Any]) -> dict[str, Any]:
    """Rule 3: an ``enum`` of non-array values beside ``"type": "array"`` lists the allowed
    items, so it moves into ``items`` (unless ``items`` has an ``enum`` of its own)."""
    enum = schema.get("enum")
    items = schema.get("items", {})
    if (
        schema.get("type") != "array"
        or not isinstance(enum, list)
        or any(isinstance(member, list) for member in enum)
        or not isinstance(items, dict)
        or "enum" in items
    ):
        return schema
    moved = {key: value for key, value in schema.items() if key != "enum"}
    moved["items"] = {**items, "enum": enum}
    return moved


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every object subschema of ``schema``, itself included (iteratively, any order)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        for key, value in node.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                stack.extend(value.values())
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                stack.extend(value)
            elif key in _ONE_SCHEMA:
                stack.append(value)


def type_names(schema: Any) -> list[str]:
    """Every ``type`` name used in a (raw or normalised) schema, for checks and counts."""
    found: list[str] = []
    for node in subschemas(schema):
        declared = node.get("type")
        if isinstance(declared, list):
            found.extend(str(name) for name in declared)
        elif "type" in node:
            found.append(str(declared))
    return found


def choose(value: Any) -> Any:
    """One acceptable value as a model would send it: a dict member's options (and those of
    dicts inside lists) reduced to their first choice."""
    if isinstance(value, dict):
        return first_choice(value)
    if isinstance(value, list):
        return [choose(item) for item in value]
    return value


def options(acceptable: Any) -> list[Any]:
    """Every acceptable value of one argument, in order; ``OMIT`` stands for ``""``."""
    if not isinstance(acceptable, list):
        return [choose(acceptable)]
    return [OMIT if option == "" else choose(option) for option in acceptable]


def first_choice(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments with the first option that is not ``""`` for each argument;
    arguments that may only be omitted are left out."""
    chosen: dict[str, Any] = {}
    for name, acceptable in arguments.items():
        for option in options(acceptable):
            if option is not OMIT:
                chosen[name] = option
                break
    return chosen


def _matches(json_name: str, value: object) -> bool:
    if json_name == "string":
        return isinstance(value, str)
    if json_name == "boolean":
        return isinstance(value, bool)
    if json_name in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return json_name == "number" or float(value).is_integer()
    if json_name == "array":
        return isinstance(value, list)
    if json_name == "object":
        return isinstance(value, dict)
    return value is None


def enum_type_conflicts(schema: Any) -> list[str]:
    """The (JSON Schema) type of every subschema whose ``enum`` has a member its ``type`` does
    not allow; works on raw BFCL schemas (type names mapped) and on normalised ones."""
    found: list[str] = []
    for node in subschemas(schema):
        declared, enum = node.get("type"), node.get("enum")
        if isinstance(declared, str) and isinstance(enum, list):
            name = json_type(declared)
            if name is not None and not all(_matches(name, member) for member in enum):
                found.append(name)
    return found
