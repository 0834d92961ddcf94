"""Building blocks for the example catalog.

Tools are declared as data: a name, a description, a list of parameters and either a shape of
fake output fields or a small function that computes the answer. This module turns those
declarations into ``ToolDefinition`` objects with JSON Schema (draft 2020-12) parameters.

Fake data is derived from a BLAKE2 hash of the tool name and its arguments, so the same call
always gives the same answer on every machine and every run; nothing reads the clock, the
network, the disk or a random source.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, TypeVar

from prism_tools import _json
from prism_tools.types import JSONValue, ToolDefinition, ToolExecutionContext, ToolKind

T = TypeVar("T")

Schema = dict[str, JSONValue]
Args = Mapping[str, JSONValue]
Compute = Callable[[Args], JSONValue]
"""A tool body that only needs its arguments."""
Handler = Callable[[dict[str, JSONValue], ToolExecutionContext], Any]
"""A full tool body, ``execute(args, context)``, sync or async."""

REFERENCE_DAY = date(2025, 3, 3)
"""The "today" of all fake data: anchored, not read from the clock, so answers never drift."""

EARLIEST_DAY = date(1900, 1, 1)
LATEST_DAY = date(2100, 12, 31)
"""The dates the tools support; a date argument outside them is refused with a ``ValueError``
naming the field, before any date arithmetic could overflow."""
DAY_RANGE_NOTE = f"Supported years: {EARLIEST_DAY.year}-{LATEST_DAY.year}."

MAX_AMOUNT = 1_000_000_000_000
"""The largest money amount a calculator or money field takes (a trillion in major units)."""
MAX_PAYMENT = 1_000_000_000
"""The largest amount of a single payment, invoice or payout (a billion in major units)."""
MAX_MAGNITUDE = 1_000_000_000_000_000
"""The largest absolute value of a plain measurement or data value (10^15; floats count whole
numbers exactly up to about 9 * 10^15)."""
DATE_FORMATS = frozenset(("date", "date-time"))
RESULT_OUT_OF_RANGE = "the result is out of range (too large to represent); use smaller values"

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    """One property of a tool's arguments object."""

    name: str
    schema: Schema
    required: bool = True


def _param(
    name: str,
    description: str,
    schema: Schema,
    *,
    required: bool,
    example: JSONValue = None,
    default: JSONValue = None,
) -> Param:
    full: Schema = {**schema, "description": description}
    if default is not None:
        full["default"] = default
    if example is not None:
        full["examples"] = [example]
    return Param(name, full, required)


def string(
    name: str,
    description: str,
    *,
    required: bool = True,
    example: str | None = None,
    default: str | None = None,
    min_length: int | None = 1,
    max_length: int | None = None,
    pattern: str | None = None,
    fmt: str | None = None,
) -> Param:
    """A string property; ``fmt`` sets the JSON Schema ``format`` (``date``, ``email``, ...).

    A date or timestamp says in its description which years the tools support (JSON Schema has
    no keyword for a range of dates); ``check_dates`` refuses the others."""
    if fmt in DATE_FORMATS:
        description = f"{description} {DAY_RANGE_NOTE}"
    schema: Schema = {"type": "string"}
    if min_length is not None:
        schema["minLength"] = min_length
    if max_length is not None:
        schema["maxLength"] = max_length
    if pattern is not None:
        schema["pattern"] = pattern
    if fmt is not None:
        schema["format"] = fmt
    return _param(name, description, schema, required=required, example=example, default=default)


def day(
    name: str, description: str, *, required: bool = True, example: str = "2025-03-14"
) -> Param:
    """A calendar date, ``YYYY-MM-DD``."""
    return string(name, description, required=required, example=example, fmt="date")


def moment(
    name: str, description: str, *, required: bool = True, example: str = "2025-03-14T09:30:00Z"
) -> Param:
    """A timestamp in RFC 3339 form."""
    return string(name, description, required=required, example=example, fmt="date-time")


def email(
    name: str, description: str, *, required: bool = True, example: str = "ana.ribeiro@example.com"
) -> Param:
    """An email address."""
    return string(name, description, required=required, example=example, fmt="email")


def integer(
    name: str,
    description: str,
    *,
    required: bool = True,
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
    example: int | None = None,
) -> Param:
    """An integer property with optional bounds."""
    schema: Schema = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return _param(name, description, schema, required=required, example=example, default=default)


def number(
    name: str,
    description: str,
    *,
    required: bool = True,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: float | None = None,
    default: float | None = None,
    example: float | None = None,
) -> Param:
    """A number property with optional bounds."""
    schema: Schema = {"type": "number"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    if exclusive_minimum is not None:
        schema["exclusiveMinimum"] = exclusive_minimum
    return _param(name, description, schema, required=required, example=example, default=default)


def boolean(name: str, description: str, *, default: bool = False) -> Param:
    """An optional boolean flag."""
    return _param(name, description, {"type": "boolean", "default": default}, required=False)


def choice(
    name: str,
    description: str,
    options: Sequence[str],
    *,
    required: bool = True,
    default: str | None = None,
) -> Param:
    """A string restricted to ``options``."""
    return _param(
        name,
        description,
        {"type": "string", "enum": list(options)},
        required=required,
        default=default,
    )


def strings(
    name: str,
    description: str,
    *,
    required: bool = True,
    min_items: int = 1,
    max_items: int | None = 100,
    example: list[str] | None = None,
    item_format: str | None = None,
) -> Param:
    """An array of non-empty strings, at most ``max_items`` of them (100 unless told)."""
    items: Schema = {"type": "string", "minLength": 1}
    if item_format is not None:
        items["format"] = item_format
    schema: Schema = {"type": "array", "items": items, "minItems": min_items}
    if max_items is not None:
        schema["maxItems"] = max_items
    return _param(name, description, schema, required=required, example=example)


def numbers(
    name: str,
    description: str,
    *,
    required: bool = True,
    min_items: int = 1,
    max_items: int = 10_000,
    minimum: float = -MAX_MAGNITUDE,
    maximum: float = MAX_MAGNITUDE,
    example: list[float] | None = None,
) -> Param:
    """An array of numbers within [``minimum``, ``maximum``], at most ``max_items`` of them."""
    items: Schema = {"type": "number", "minimum": minimum, "maximum": maximum}
    schema: Schema = {"type": "array", "items": items, "minItems": min_items,
                      "maxItems": max_items}  # fmt: skip
    return _param(name, description, schema, required=required, example=example)


def obj(name: str, description: str, props: Sequence[Param], *, required: bool = True) -> Param:
    """A nested object with its own properties; closed like the top level."""
    return _param(name, description, object_schema(props), required=required)


def records(
    name: str,
    description: str,
    props: Sequence[Param],
    *,
    required: bool = True,
    min_items: int = 1,
    max_items: int = 100,
) -> Param:
    """An array of closed objects, at most ``max_items`` of them."""
    schema: Schema = {
        "type": "array",
        "items": object_schema(props),
        "minItems": min_items,
        "maxItems": max_items,
    }
    return _param(name, description, schema, required=required)


def object_schema(props: Sequence[Param]) -> Schema:
    """A closed JSON Schema object over ``props``."""
    names = [prop.name for prop in props]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate property names in {names}")
    return {
        "type": "object",
        "properties": {prop.name: prop.schema for prop in props},
        "required": [prop.name for prop in props if prop.required],
        "additionalProperties": False,
    }


# Parameters many tools share.
LIMIT = integer(
    "limit", "Maximum number of items to return.", required=False, minimum=1, maximum=50, default=5
)
CITY = string(
    "city", "City name, optionally followed by a country, e.g. 'Lisbon, PT'.", example="Lisbon"
)
CURRENCY = string(
    "currency",
    "ISO 4217 currency code, e.g. 'EUR'.",
    required=False,
    default="USD",
    pattern="^[A-Z]{3}$",
    example="EUR",
)
QUERY = string("query", "Free-text search query.", example="quarterly report")

# --------------------------------------------------------------------------------------------
# Deterministic fake data
# --------------------------------------------------------------------------------------------


class Draw:
    """A deterministic source of fake values derived from a hash; ``sub`` forks a child."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def seeded(cls, *parts: object) -> Draw:
        """A draw keyed by ``parts`` (rendered canonically as JSON)."""
        blob = _json.dumps_lenient([_canonical(part) for part in parts])
        return cls(hashlib.blake2b(blob, digest_size=16).digest())

    def sub(self, label: str | int) -> Draw:
        """An independent child draw for ``label``."""
        return Draw(hashlib.blake2b(self._key + str(label).encode(), digest_size=16).digest())

    def unit(self) -> float:
        """A value in [0, 1)."""
        return int.from_bytes(self._key[:7], "big") / float(1 << 56)

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return low + int(self.unit() * (high - low + 1))

    def number(self, low: float, high: float, digits: int = 2) -> float:
        """A number in [low, high], rounded."""
        return round(low + self.unit() * (high - low), digits)

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options``."""
        return options[int(self.unit() * len(options))]

    def hex(self, width: int = 10) -> str:
        """Hex digits of the key, for ids."""
        return self._key.hex()[:width]


def _canonical(value: object) -> object:
    # Sorting keys makes {"a":1,"b":2} and {"b":2,"a":1} the same seed.
    if isinstance(value, Mapping):
        return {str(key): _canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    return value


FIRST_NAMES = (
    "Ana", "Bruno", "Chen", "Dalia", "Emeka", "Freya", "Goran", "Hana", "Ivan", "Julia",
    "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tomas",
)  # fmt: skip
LAST_NAMES = (
    "Ribeiro", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Kowalski", "Haddad", "Novak",
    "Fischer", "Alvarez", "Singh", "Byrne", "Costa", "Meyer", "Sato", "Petrov",
)  # fmt: skip
COMPANIES = (
    "Northwind Traders", "Blue Heron Labs", "Copperline Logistics", "Juniper Health",
    "Atlas Grid", "Maple & Finch", "Orbit Analytics", "Saltmarsh Foods", "Tessellate Media",
    "Vantage Robotics", "Willow Creek Capital", "Zephyr Outdoor",
)  # fmt: skip
TOPICS = (
    "budget", "roadmap", "onboarding", "migration", "launch", "pricing", "hiring", "security",
    "retention", "forecast", "vendor", "compliance", "design", "customer", "quarterly", "support",
)  # fmt: skip
NOUNS = (
    "review", "plan", "sync", "update", "proposal", "summary", "checklist", "report", "kickoff",
    "retro", "brief", "audit",
)  # fmt: skip
SERVICES = ("api-gateway", "checkout", "search", "billing", "auth", "notifications", "ledger")
REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1")


@dataclass(frozen=True, slots=True)
class City:
    """A known city for maps, weather and travel tools."""

    name: str
    country: str
    lat: float
    lon: float
    utc_offset: float
    timezone: str
    currency: str
    iata: str


CITIES: tuple[City, ...] = (
    City("Lisbon", "PT", 38.7223, -9.1393, 0, "Europe/Lisbon", "EUR", "LIS"),
    City("Madrid", "ES", 40.4168, -3.7038, 1, "Europe/Madrid", "EUR", "MAD"),
    City("Paris", "FR", 48.8566, 2.3522, 1, "Europe/Paris", "EUR", "CDG"),
    City("London", "GB", 51.5074, -0.1278, 0, "Europe/London", "GBP", "LHR"),
    City("Berlin", "DE", 52.52, 13.405, 1, "Europe/Berlin", "EUR", "BER"),
    City("Amsterdam", "NL", 52.3676, 4.9041, 1, "Europe/Amsterdam", "EUR", "AMS"),
    City("Stockholm", "SE", 59.3293, 18.0686, 1, "Europe/Stockholm", "SEK", "ARN"),
    City("Warsaw", "PL", 52.2297, 21.0122, 1, "Europe/Warsaw", "PLN", "WAW"),
    City("Zurich", "CH", 47.3769, 8.5417, 1, "Europe/Zurich", "CHF", "ZRH"),
    City("New York", "US", 40.7128, -74.006, -5, "America/New_York", "USD", "JFK"),
    City("Chicago", "US", 41.8781, -87.6298, -6, "America/Chicago", "USD", "ORD"),
    City("San Francisco", "US", 37.7749, -122.4194, -8, "America/Los_Angeles", "USD", "SFO"),
    City("Toronto", "CA", 43.6532, -79.3832, -5, "America/Toronto", "CAD", "YYZ"),
    City("Mexico City", "MX", 19.4326, -99.1332, -6, "America/Mexico_City", "MXN", "MEX"),
    City("Sao Paulo", "BR", -23.5505, -46.6333, -3, "America/Sao_Paulo", "BRL", "GRU"),
    City(
        "Buenos Aires", "AR", -34.6037, -58.3816, -3, "America/Argentina/Buenos_Aires", "ARS", "EZE"
    ),
    City("Lagos", "NG", 6.5244, 3.3792, 1, "Africa/Lagos", "NGN", "LOS"),
    City("Nairobi", "KE", -1.2921, 36.8219, 3, "Africa/Nairobi", "KES", "NBO"),
    City("Cairo", "EG", 30.0444, 31.2357, 2, "Africa/Cairo", "EGP", "CAI"),
    City("Dubai", "AE", 25.2048, 55.2708, 4, "Asia/Dubai", "AED", "DXB"),
    City("Mumbai", "IN", 19.076, 72.8777, 5.5, "Asia/Kolkata", "INR", "BOM"),
    City("Singapore", "SG", 1.3521, 103.8198, 8, "Asia/Singapore", "SGD", "SIN"),
    City("Hong Kong", "HK", 22.3193, 114.1694, 8, "Asia/Hong_Kong", "HKD", "HKG"),
    City("Tokyo", "JP", 35.6762, 139.6503, 9, "Asia/Tokyo", "JPY", "HND"),
    City("Seoul", "KR", 37.5665, 126.978, 9, "Asia/Seoul", "KRW", "ICN"),
    City("Sydney", "AU", -33.8688, 151.2093, 10, "Australia/Sydney", "AUD", "SYD"),
    City("Auckland", "NZ", -36.8485, 174.7633, 12, "Pacific/Auckland", "NZD", "AKL"),
)
_CITY_INDEX = {city.name.lower(): city for city in CITIES}


def find_city(text: object) -> City:
    """The known city named by ``text`` ("Lisbon", "lisbon, PT"), else a stable made-up one."""
    raw = str(text or "").strip()
    known = _CITY_INDEX.get(raw.split(",")[0].strip().lower())
    if known is not None:
        return known
    draw = Draw.seeded("city", raw.lower())
    offset = draw.sub("tz").integer(-11, 12)
    return City(
        name=raw or "Unknown",
        country="ZZ",
        lat=draw.sub("lat").number(-60, 70, 4),
        lon=draw.sub("lon").number(-180, 180, 4),
        utc_offset=offset,
        timezone=f"Etc/GMT{-offset:+d}" if offset else "UTC",
        currency="USD",
        iata=raw[:3].upper().ljust(3, "X") if raw.isascii() else "XXX",
    )


def person_name(draw: Draw) -> str:
    """A made-up full name."""
    return f"{draw.sub('first').pick(FIRST_NAMES)} {draw.sub('last').pick(LAST_NAMES)}"


def email_of(name: str, domain: str = "example.com") -> str:
    """An address for ``name`` at a reserved example domain."""
    return f"{name.lower().replace(' ', '.')}@{domain}"


def leading_day(value: object) -> date | None:
    """The date ``value`` starts with (``YYYY-MM-DD``, alone or opening a timestamp), if any."""
    if isinstance(value, str) and len(value) >= 10:
        try:
            return date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None


def check_day(when: date, name: str) -> date:
    """``when`` if it falls within the supported years, else a ``ValueError`` naming the field
    ``name`` (date arithmetic near year 1 or 9999 would overflow)."""
    on = when.date() if isinstance(when, datetime) else when
    if not EARLIEST_DAY <= on <= LATEST_DAY:
        raise ValueError(
            f"'{name}' must be a date from {EARLIEST_DAY.isoformat()} to "
            f"{LATEST_DAY.isoformat()}, got {on.isoformat()}"
        )
    return when


def parse_day(value: object, fallback: date = REFERENCE_DAY, *, name: str = "date") -> date:
    """``value`` as a date (``YYYY-MM-DD`` or a timestamp), else ``fallback``; a date outside
    the supported years is a ``ValueError`` naming the field ``name``."""
    when = leading_day(value)
    return fallback if when is None else check_day(when, name)


def count_weekdays(first: date, days: int) -> int:
    """How many of the ``days`` consecutive days from ``first`` fall on Monday to Friday
    (counted, not walked, so a long span costs no more than a short one)."""
    weeks, rest = divmod(max(0, days), 7)
    start = first.weekday()
    return weeks * 5 + sum(1 for offset in range(rest) if (start + offset) % 7 < 5)


def iso_stamp(when: date, hour: int = 9, minute: int = 0) -> str:
    """``when`` at ``hour:minute`` UTC in RFC 3339 form."""
    return datetime.combine(when, time(hour % 24, minute % 60)).isoformat() + "Z"


# --------------------------------------------------------------------------------------------
# Output fields: each is ``field(draw, args) -> value``
# --------------------------------------------------------------------------------------------

Field = Callable[[Draw, Args], JSONValue]
Shape = Mapping[str, Field]


def echo(arg: str, default: JSONValue = None) -> Field:
    """The argument ``arg`` as given (or ``default``)."""
    return lambda draw, args: args.get(arg, default)


def const(value: JSONValue) -> Field:
    """Always ``value``."""
    return lambda draw, args: value


def rint(low: int, high: int) -> Field:
    """An integer in [low, high]."""
    return lambda draw, args: draw.integer(low, high)


def rnum(low: float, high: float, digits: int = 2) -> Field:
    """A number in [low, high]."""
    return lambda draw, args: draw.number(low, high, digits)


def pick(*options: JSONValue) -> Field:
    """One of ``options``."""
    return lambda draw, args: draw.pick(options)


def chance(probability: float) -> Field:
    """True with the given probability (over the hash space)."""
    return lambda draw, args: draw.unit() < probability


def ident(prefix: str, width: int = 10) -> Field:
    """An id such as ``evt_3f9a1c0b2d``."""
    return lambda draw, args: f"{prefix}_{draw.hex(width)}"


def on_day(low: int = 0, high: int = 30, *, base: str | None = None) -> Field:
    """A date ``low``..``high`` days after the ``base`` argument (or the reference day)."""

    def field(draw: Draw, args: Args) -> JSONValue:
        start = parse_day(args.get(base), name=base) if base else REFERENCE_DAY
        return (start + timedelta(days=draw.integer(low, high))).isoformat()

    return field


def at_time(low_days: int = -7, high_days: int = 0, *, base: str | None = None) -> Field:
    """A timestamp on a day ``low_days``..``high_days`` from ``base`` (or the reference day)."""

    def field(draw: Draw, args: Args) -> JSONValue:
        start = parse_day(args.get(base), name=base) if base else REFERENCE_DAY
        when = start + timedelta(days=draw.sub("d").integer(low_days, high_days))
        return iso_stamp(when, draw.sub("h").integer(7, 19), draw.sub("m").pick((0, 15, 30, 45)))

    return field


def person() -> Field:
    """A made-up full name."""
    return lambda draw, args: person_name(draw)


def contact() -> Field:
    """A made-up name with an email address."""

    def field(draw: Draw, args: Args) -> JSONValue:
        name = person_name(draw)
        return {"name": name, "email": email_of(name)}

    return field


def company() -> Field:
    """A made-up company name."""
    return lambda draw, args: draw.pick(COMPANIES)


def title(extra: Sequence[str] = ()) -> Field:
    """A short made-up title such as ``"Pricing review"``."""

    def field(draw: Draw, args: Args) -> JSONValue:
        words = [draw.sub("t").pick(TOPICS).capitalize(), draw.sub("n").pick(NOUNS)]
        return " ".join([*words, *extra])

    return field


def fmt(template: str) -> Field:
    """``template`` filled from the arguments (a missing argument renders empty)."""

    class _Blank(dict[str, object]):
        def __missing__(self, key: str) -> str:
            return ""

    return lambda draw, args: template.format_map(_Blank(args))


def money(low: float, high: float, currency_arg: str = "currency") -> Field:
    """``{"amount": ..., "currency": ...}``; the currency comes from ``currency_arg``."""

    def field(draw: Draw, args: Args) -> JSONValue:
        currency = args.get(currency_arg)
        return {
            "amount": draw.number(low, high, 2),
            "currency": currency if isinstance(currency, str) else "USD",
        }

    return field


def link(host: str, path: str = "") -> Field:
    """A URL on a reserved example host."""
    return lambda draw, args: f"https://{host}.example.com/{path}{draw.hex(12)}"


def nested(shape: Shape) -> Field:
    """A dict built from ``shape``."""
    return lambda draw, args: build(shape, draw, args)


def rows(
    shape: Shape | Field, *, count_arg: str = "limit", default: int = 3, cap: int = 25
) -> Field:
    """A list of items built from ``shape`` (a dict of fields, or one field that makes the
    whole item); the length comes from the argument ``count_arg``."""
    item: Field = shape if callable(shape) else nested(shape)

    def field(draw: Draw, args: Args) -> JSONValue:
        wanted = args.get(count_arg, default)
        count = wanted if isinstance(wanted, int) and not isinstance(wanted, bool) else default
        count = max(0, min(count, cap))
        return [item(draw.sub(index), args) for index in range(count)]

    return field


def from_list(arg: str, shape: Shape, key: str = "item") -> Field:
    """One dict per element of the list argument ``arg``, with the element under ``key``."""

    def field(draw: Draw, args: Args) -> JSONValue:
        items = args.get(arg)
        if not isinstance(items, list):
            return []
        return [{key: item, **build(shape, draw.sub(str(item)), args)} for item in items]

    return field


def each_of(options: Sequence[str], shape: Shape, key: str = "name") -> Field:
    """One dict per fixed option (a distinct list), with the option under ``key``."""

    def field(draw: Draw, args: Args) -> JSONValue:
        return [{key: option, **build(shape, draw.sub(option), args)} for option in options]

    return field


def several(item: Field, count: int) -> Field:
    """A list of ``count`` values of ``item``."""
    return lambda draw, args: [item(draw.sub(index), args) for index in range(count)]


def build(shape: Shape, draw: Draw, args: Args) -> dict[str, JSONValue]:
    """Evaluate every field of ``shape``, each from its own child draw."""
    return {name: field(draw.sub(name), args) for name, field in shape.items()}


# --------------------------------------------------------------------------------------------
# Tool specs
# --------------------------------------------------------------------------------------------

_VERB_KINDS: dict[str, ToolKind] = {
    **dict.fromkeys(
        ("get", "list", "read", "check", "describe", "count", "track", "lookup", "preview",
         "export", "verify", "validate", "compare", "estimate", "forecast", "analyze", "summarize",
         "detect", "extract", "generate", "format", "parse", "recommend", "diff", "explain"),
        "read",
    ),
    **dict.fromkeys(("search", "find", "query", "autocomplete", "browse"), "search"),
    **dict.fromkeys(
        ("create", "update", "set", "add", "edit", "rename", "tag", "label", "assign", "log",
         "draft", "schedule", "book", "reserve", "invite", "submit", "approve", "reject", "mark",
         "pin", "merge", "link", "apply", "enroll", "upload", "save", "record", "request",
         "respond", "reply", "register", "configure", "change", "lock", "unlock", "arm",
         "disarm", "adjust", "react", "share", "convert", "make", "qualify", "select", "order",
         "place", "capture", "issue",
         "open", "start", "pause", "resume", "escalate", "acknowledge", "resolve", "close",
         "complete", "silence", "toggle", "checkin", "follow", "sign", "redeem", "refill",
         "subscribe", "renew", "import", "sync", "reindex", "onboard", "snooze"),
        "edit",
    ),
    **dict.fromkeys(
        ("delete", "remove", "cancel", "void", "revoke", "archive", "purge", "unsubscribe",
         "offboard", "decline", "terminate", "unfollow", "drop"),
        "delete",
    ),
    **dict.fromkeys(("move", "transfer", "copy", "forward", "reassign"), "move"),
    **dict.fromkeys(
        ("send", "deploy", "rollback", "restart", "scale", "run", "trigger", "rotate", "post",
         "publish", "refund", "pay", "execute", "charge", "dispatch", "turn", "play", "notify",
         "broadcast", "provision", "flush", "invalidate", "backup", "restore", "compress", "print",
         "translate", "transcribe", "retry", "checkout", "call", "ping", "page"),
        "execute",
    ),
    **dict.fromkeys(("calculate", "compute", "solve", "plan", "optimize", "split"), "think"),
}  # fmt: skip


def infer_kind(name: str) -> ToolKind:
    """The tool kind implied by the leading verb of a snake_case name."""
    return _VERB_KINDS.get(name.split("_", 1)[0], "other")


@dataclass(frozen=True, slots=True)
class Spec:
    """A tool as data; ``definition()`` makes the ``ToolDefinition``."""

    name: str
    description: str
    params: tuple[Param, ...]
    handler: Handler
    domain: str = "general"
    kind: ToolKind | None = None
    exclusive: bool = False

    def parameters(self) -> Schema:
        """The JSON Schema of the arguments object."""
        return object_schema(self.params)

    def definition(self) -> ToolDefinition:
        """The ``ToolDefinition`` for this spec."""
        return ToolDefinition(
            name=self.name,
            execute=self.handler,
            description=self.description,
            parameters=self.parameters(),
            exclusive=self.exclusive,
            kind=self.kind or infer_kind(self.name),
            metadata={"domain": self.domain, "origin": "prism_tools.examples"},
        )


def _with_defaults(params: Sequence[Param]) -> dict[str, JSONValue]:
    return {p.name: p.schema["default"] for p in params if "default" in p.schema}


# --------------------------------------------------------------------------------------------
# Guards every shape and compute body runs behind
# --------------------------------------------------------------------------------------------

_INT_LIMIT = 2**63  # JSON writers (orjson among them) hold 64-bit integers, no wider


def finite_result(value: T) -> T:
    """``value`` if every number in it is finite and fits a 64-bit integer; otherwise a
    ``ValueError`` (``RESULT_OUT_OF_RANGE``), never a NaN or infinity written as ``null``."""
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(RESULT_OUT_OF_RANGE)
        elif isinstance(item, int):
            if not -_INT_LIMIT <= item < _INT_LIMIT:
                raise ValueError(RESULT_OUT_OF_RANGE)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return value


def has_dates(schema: JSONValue) -> bool:
    """Whether ``schema`` has a ``date`` or ``date-time`` string anywhere inside."""
    if isinstance(schema, dict):
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in DATE_FORMATS:
            return True
        return any(has_dates(child) for child in schema.values())
    if isinstance(schema, list):
        return any(has_dates(child) for child in schema)
    return False


def check_dates(schema: JSONValue, value: JSONValue, where: str = "") -> None:
    """Refuse, with a ``ValueError`` naming the field, any ``date`` or ``date-time`` string in
    ``value`` (arguments shaped by ``schema``) outside the supported years. Text that is not a
    date is left to the tool, which falls back or refuses it in its own words."""
    if not isinstance(schema, dict):
        return
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in DATE_FORMATS:
        when = leading_day(value)
        if when is not None:
            check_day(when, where or "date")
        return
    properties = schema.get("properties")
    if isinstance(properties, dict) and isinstance(value, dict):
        for key, child in properties.items():
            if key in value:
                check_dates(child, value[key], f"{where}.{key}" if where else key)
    items = schema.get("items")
    if isinstance(items, dict) and isinstance(value, list):
        for index, item in enumerate(value):
            check_dates(items, item, f"{where}[{index}]")


def _guard(schema: Schema | None, args: Args) -> None:
    if schema is not None:
        check_dates(schema, dict(args))


def _shape_handler(
    name: str, shape: Shape, seed: Sequence[str] | None, defaults: Args, dated: Schema | None
) -> Handler:
    def execute(args: dict[str, JSONValue], context: ToolExecutionContext) -> JSONValue:
        _guard(dated, args)
        merged = {**defaults, **args}
        chosen = merged if seed is None else {key: merged.get(key) for key in seed}
        return finite_result(build(shape, Draw.seeded(name, chosen), merged))

    return execute


def _async_shape_handler(
    name: str, shape: Shape, seed: Sequence[str] | None, defaults: Args, dated: Schema | None
) -> Handler:
    sync = _shape_handler(name, shape, seed, defaults, dated)

    async def execute(args: dict[str, JSONValue], context: ToolExecutionContext) -> JSONValue:
        return sync(args, context)

    return execute


def _compute_handler(compute: Compute, defaults: Args, dated: Schema | None) -> Handler:
    def execute(args: dict[str, JSONValue], context: ToolExecutionContext) -> JSONValue:
        _guard(dated, args)
        return finite_result(compute({**defaults, **args}))

    return execute


# Tools that stand for remote lookups are async, as their real counterparts would be.
_ASYNC_KINDS = frozenset(("search", "fetch"))


def tool(
    name: str,
    description: str,
    params: Iterable[Param] = (),
    out: Shape | None = None,
    *,
    compute: Compute | None = None,
    handler: Handler | None = None,
    seed: Sequence[str] | None = None,
    kind: ToolKind | None = None,
    exclusive: bool = False,
) -> Spec:
    """Declare one tool: exactly one of ``out`` (fake fields), ``compute`` or ``handler``.

    ``out`` and ``compute`` bodies run behind two guards: a date argument outside the
    supported years is refused before the body runs, and a result holding a NaN, an infinity
    or an integer wider than 64 bits is refused after it (both as a ``ValueError``, which
    dispatch turns into an error result the model can read). A ``handler`` is on its own.

    ``seed`` names the arguments the fake output depends on (default: all of them), so that,
    say, a city's weather does not change with the units asked for.
    """
    bodies = [body for body in (out, compute, handler) if body is not None]
    if len(bodies) != 1:
        raise ValueError(f"tool {name!r} needs exactly one of out, compute or handler")
    plist = tuple(params)
    defaults = _with_defaults(plist)
    schema = object_schema(plist)
    dated = schema if has_dates(schema) else None
    chosen_kind = kind or infer_kind(name)
    body: Handler
    if out is not None:
        make = _async_shape_handler if chosen_kind in _ASYNC_KINDS else _shape_handler
        body = make(name, out, seed, defaults, dated)
    elif compute is not None:
        body = _compute_handler(compute, defaults, dated)
        if kind is None and chosen_kind not in ("read", "search", "fetch"):
            chosen_kind = "think"  # a pure computation changes nothing, whatever its verb says
    else:
        assert handler is not None
        body = handler
    return Spec(name, description, plist, body, kind=chosen_kind, exclusive=exclusive)


def group(domain: str, *specs: Spec) -> tuple[Spec, ...]:
    """``specs`` tagged with ``domain``."""
    return tuple(dataclasses.replace(spec, domain=domain) for spec in specs)


# --------------------------------------------------------------------------------------------
# Helpers for compute bodies
# --------------------------------------------------------------------------------------------


def quoted(value: object, limit: int = 40) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters so a long
    argument does not make a long message."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 4]}...{text[-1]}"


def text_arg(args: Args, name: str) -> str:
    """The string argument ``name``; raises ``ValueError`` with a model-readable message."""
    value = args.get(name)
    if not isinstance(value, str):
        raise ValueError(f"'{name}' must be a string")
    return value


def num_arg(args: Args, name: str) -> float:
    """The numeric argument ``name`` as a float."""
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"'{name}' must be a number")
    return float(value)


def int_arg(args: Args, name: str) -> int:
    """The integer argument ``name``."""
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"'{name}' must be an integer")
    return value


def nums_arg(args: Args, name: str) -> list[float]:
    """The numeric list argument ``name``."""
    value = args.get(name)
    if not isinstance(value, list) or not value:
        raise ValueError(f"'{name}' must be a non-empty list of numbers")
    out: list[float] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise ValueError(f"every item of '{name}' must be a number")
        out.append(float(item))
    return out
