"""General utilities: text processing, encodings, data formats, units and arithmetic.

Every tool here computes a real answer from its arguments.
"""

from __future__ import annotations

import ast
import base64
import binascii
import csv
import difflib
import io
import math
import operator
import re
import unicodedata
import uuid
from collections import Counter
from collections.abc import Callable
from urllib.parse import quote, unquote, urlsplit

from prism_tools import _json
from prism_tools.examples._build import (
    MAX_MAGNITUDE,
    Args,
    Param,
    Spec,
    boolean,
    choice,
    group,
    int_arg,
    integer,
    num_arg,
    number,
    numbers,
    quoted,
    string,
    text_arg,
    tool,
)
from prism_tools.types import JSONValue

TEXT = string(
    "text",
    "Text to process.",
    min_length=0,
    example="Prism routes every tool call through one checked gate. It is fast.",
)

# The lookbehind starts a match only where a run of local-part characters starts: without it a
# long run with no '@' is rescanned from every position (quadratic time on a long text).
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_URL = re.compile(r"https?://[^\s<>\"')\]]+")
_PHONE = re.compile(r"\+?\d[\d\s().-]{7,}\d")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")


def word_count(args: Args) -> JSONValue:
    text = text_arg(args, "text")
    words = _WORD.findall(text)
    sentences = [part for part in _SENTENCE.split(text.strip()) if part]
    return {
        "words": len(words),
        "characters": len(text),
        "characters_no_spaces": len(re.sub(r"\s", "", text)),
        "sentences": len(sentences),
        "reading_time_seconds": math.ceil(len(words) / 238 * 60),  # ~238 wpm silent reading
    }


def slugify(args: Args) -> JSONValue:
    text = unicodedata.normalize("NFKD", text_arg(args, "text"))
    ascii_text = text.encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")
    limit = args.get("max_length")
    if isinstance(limit, int) and len(slug) > limit:
        slug = slug[:limit].rstrip("-")
    return {"slug": slug}


def change_case(args: Args) -> JSONValue:
    text = text_arg(args, "text")
    words = _WORD.findall(re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text))
    style = args.get("style")
    converters: dict[str, Callable[[], str]] = {
        "upper": text.upper,
        "lower": text.lower,
        "title": lambda: " ".join(word.capitalize() for word in words),
        "sentence": lambda: text[:1].upper() + text[1:].lower(),
        "snake": lambda: "_".join(word.lower() for word in words),
        "kebab": lambda: "-".join(word.lower() for word in words),
        "camel": lambda: "".join(
            word.lower() if index == 0 else word.capitalize() for index, word in enumerate(words)
        ),
        "pascal": lambda: "".join(word.capitalize() for word in words),
    }
    return {"text": converters[str(style)](), "style": style}


def b64_encode(args: Args) -> JSONValue:
    data = text_arg(args, "text").encode("utf-8")
    encoder = base64.urlsafe_b64encode if args.get("url_safe") else base64.b64encode
    return {"encoded": encoder(data).decode("ascii")}


def b64_decode(args: Args) -> JSONValue:
    raw = text_arg(args, "encoded").strip()
    padded = raw + "=" * (-len(raw) % 4)
    try:
        data = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except binascii.Error as err:
        raise ValueError(f"not valid base64: {err}") from err
    try:
        return {"text": data.decode("utf-8"), "bytes": len(data)}
    except UnicodeDecodeError:
        return {"hex": data.hex(), "bytes": len(data), "note": "not UTF-8 text"}


def url_encode(args: Args) -> JSONValue:
    return {"encoded": quote(text_arg(args, "text"), safe="")}


def url_decode(args: Args) -> JSONValue:
    return {"text": unquote(text_arg(args, "encoded").replace("+", " "))}


def parse_url(args: Args) -> JSONValue:
    parts = urlsplit(text_arg(args, "url"))
    query = [pair.split("=", 1) for pair in parts.query.split("&") if pair]
    return {
        "scheme": parts.scheme,
        "host": parts.hostname,
        "port": parts.port,
        "path": parts.path,
        "query": {unquote(k): unquote(v[0]) if v else "" for k, *v in query},
        "fragment": parts.fragment or None,
    }


def extract_contacts(args: Args) -> JSONValue:
    text = text_arg(args, "text")
    return {
        "emails": sorted(set(_EMAIL.findall(text))),
        "urls": sorted(set(_URL.findall(text))),
        "phone_numbers": sorted({match.strip() for match in _PHONE.findall(text)}),
    }


def mask_pii(args: Args) -> JSONValue:
    text = text_arg(args, "text")
    counts = {"emails": 0, "phone_numbers": 0}

    def email(match: re.Match[str]) -> str:
        counts["emails"] += 1
        return "[EMAIL]"

    def phone(match: re.Match[str]) -> str:
        counts["phone_numbers"] += 1
        return "[PHONE]"

    masked = _PHONE.sub(phone, _EMAIL.sub(email, text))
    return {"text": masked, "masked": counts}


def validate_email_address(args: Args) -> JSONValue:
    address = text_arg(args, "email").strip()
    local, _, domain = address.rpartition("@")
    problems: list[str] = []
    if not local:
        problems.append("missing local part before '@'")
    if len(local) > 64:
        problems.append("local part longer than 64 characters")
    if "." not in domain or domain.startswith(".") or domain.endswith("."):
        problems.append("domain needs a dot and cannot start or end with one")
    if ".." in address:
        problems.append("consecutive dots")
    if not _EMAIL.fullmatch(address):
        problems.append("contains characters an address cannot have")
    return {"email": address, "valid": not problems, "problems": problems}


def format_phone(args: Args) -> JSONValue:
    digits = re.sub(r"\D", "", text_arg(args, "number"))
    code = re.sub(r"\D", "", str(args.get("country_calling_code", "")))
    raw = text_arg(args, "number").strip()
    if not raw.startswith("+") and code and not digits.startswith(code):
        digits = code + digits.lstrip("0")
    if not 8 <= len(digits) <= 15:
        raise ValueError("a phone number has 8 to 15 digits including the country code")
    return {"e164": f"+{digits}", "digits": len(digits)}


_STOPWORDS = {
    "en": {"the", "and", "is", "of", "to", "in", "it", "that", "with", "for"},
    "es": {"el", "la", "de", "que", "y", "en", "los", "es", "por", "con"},
    "pt": {"o", "a", "de", "que", "e", "em", "os", "para", "com", "não"},
    "fr": {"le", "la", "de", "et", "les", "des", "est", "que", "pour", "avec"},
    "de": {"der", "die", "und", "das", "ist", "nicht", "mit", "ein", "zu", "für"},
    "it": {"il", "di", "che", "e", "la", "per", "non", "con", "sono", "una"},
}


def detect_language(args: Args) -> JSONValue:
    words = [word.lower() for word in _WORD.findall(text_arg(args, "text"))]
    scores = {lang: sum(word in stop for word in words) for lang, stop in _STOPWORDS.items()}
    best = max(scores, key=lambda lang: scores[lang])
    total = sum(scores.values())
    if not total:
        return {"language": None, "confidence": 0.0, "note": "too few common words to tell"}
    return {"language": best, "confidence": round(scores[best] / total, 2), "scores": scores}


def summarize(args: Args) -> JSONValue:
    text = text_arg(args, "text").strip()
    count = int_arg(args, "sentences")
    sentences = [part.strip() for part in _SENTENCE.split(text) if part.strip()]
    # Extractive: keep the sentences that share the most frequent content words.
    freq = Counter(w.lower() for w in _WORD.findall(text) if len(w) > 3)
    ranked = sorted(
        range(len(sentences)),
        key=lambda i: -sum(freq.get(w.lower(), 0) for w in _WORD.findall(sentences[i])),
    )
    keep = sorted(ranked[:count])
    return {"summary": " ".join(sentences[i] for i in keep), "sentences_kept": len(keep)}


def truncate(args: Args) -> JSONValue:
    text = text_arg(args, "text")
    limit = int_arg(args, "max_characters")
    if len(text) <= limit:
        return {"text": text, "truncated": False}
    cut = text[: max(0, limit - 1)]
    if args.get("whole_words") and " " in cut:
        cut = cut[: cut.rfind(" ")]
    return {"text": cut.rstrip() + "…", "truncated": True}


def text_diff(args: Args) -> JSONValue:
    before = text_arg(args, "before").splitlines(keepends=True)
    after = text_arg(args, "after").splitlines(keepends=True)
    diff = list(difflib.unified_diff(before, after, "before", "after"))
    ratio = difflib.SequenceMatcher(None, "".join(before), "".join(after)).ratio()
    return {"diff": "".join(diff), "similarity": round(ratio, 4), "identical": not diff}


def name_uuid(args: Args) -> JSONValue:
    spaces = {"dns": uuid.NAMESPACE_DNS, "url": uuid.NAMESPACE_URL, "oid": uuid.NAMESPACE_OID}
    value = uuid.uuid5(spaces[str(args.get("namespace"))], text_arg(args, "name"))
    return {"uuid": str(value), "version": 5}


def csv_to_json(args: Args) -> JSONValue:
    # newline="": the csv module reads line ends itself (a lone "\r" in a field included).
    source = io.StringIO(text_arg(args, "csv"), newline="")
    # Cells past the header's width go to a list under "_extra" (the default key is None,
    # which JSON objects cannot hold).
    try:
        reader = csv.DictReader(source, delimiter=str(args.get("delimiter")), restkey="_extra")
        rows = list(reader)
        columns = reader.fieldnames or []
    except csv.Error as err:  # a delimiter csv refuses, a field past its size limit
        raise ValueError(f"the CSV text could not be read: {err}") from None
    return {"columns": columns, "rows": rows, "row_count": len(rows)}


def json_check(args: Args) -> JSONValue:
    raw = text_arg(args, "json")
    try:
        value = _json.loads(raw)
    except _json.JSONDecodeError as err:
        return {"valid": False, "error": str(err)}
    kind = type(value).__name__
    return {"valid": True, "type": {"dict": "object", "list": "array", "str": "string"}.get(
        kind, kind), "canonical": _json.dumps_canonical(value).decode("utf-8")}  # fmt: skip


def semver_compare(args: Args) -> JSONValue:
    def parse(text: str) -> tuple[tuple[int, int, int], str]:
        match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+\S+)?", text)
        if match is None:
            raise ValueError(f"{quoted(text)} is not a semantic version like 1.4.2")
        major, minor, patch, pre = match.groups()
        return (int(major), int(minor), int(patch)), pre or ""

    (a_core, a_pre), (b_core, b_pre) = parse(text_arg(args, "a")), parse(text_arg(args, "b"))
    if a_core != b_core:
        order = -1 if a_core < b_core else 1
    elif a_pre == b_pre:
        order = 0
    else:
        # A pre-release sorts before its release; pre-releases compare as text (simplified).
        order = -1 if (a_pre and not b_pre) or (a_pre and b_pre and a_pre < b_pre) else 1
    change = next((part for part, x, y in zip(("major", "minor", "patch"), a_core, b_core,
                                              strict=True) if x != y), None)  # fmt: skip
    return {"comparison": order, "newer": args.get("b") if order < 0 else args.get("a"),
            "differs_in": change}  # fmt: skip


_LENGTH = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048,
           "yd": 0.9144, "mi": 1609.344, "nmi": 1852.0}  # fmt: skip
_MASS = {"mg": 1e-6, "g": 0.001, "kg": 1.0, "t": 1000.0, "oz": 0.028349523125,
         "lb": 0.45359237, "st": 6.35029318}  # fmt: skip
_VOLUME = {"ml": 0.001, "l": 1.0, "tsp": 0.00492892, "tbsp": 0.0147868, "cup": 0.2365882365,
           "pt": 0.473176473, "qt": 0.946352946, "gal": 3.785411784}  # fmt: skip
_SPEED = {"m/s": 1.0, "km/h": 1 / 3.6, "mph": 0.44704, "kn": 0.514444}
_DATA = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 1024.0,
         "MiB": 1024.0**2, "GiB": 1024.0**3, "TiB": 1024.0**4}  # fmt: skip
_UNITS = (_LENGTH, _MASS, _VOLUME, _SPEED, _DATA)
ALL_UNITS = tuple(unit for table in _UNITS for unit in table)


def convert_units(args: Args) -> JSONValue:
    value = num_arg(args, "value")
    source, target = str(args.get("from_unit")), str(args.get("to_unit"))
    for table in _UNITS:
        if source in table and target in table:
            converted = value * table[source] / table[target]
            return {"value": float(f"{converted:.10g}"), "unit": target}
    raise ValueError(f"cannot convert {source} to {target}: they measure different things")


_OPS: dict[type, Callable[..., object]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}  # fmt: skip
# Each function with the fewest and most arguments it takes (None: no upper limit).
_FUNCS: dict[str, tuple[Callable[..., object], int, int | None]] = {
    "sqrt": (math.sqrt, 1, 1), "abs": (abs, 1, 1), "round": (round, 1, 2),
    "log": (math.log, 1, 2), "log10": (math.log10, 1, 1), "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1), "tan": (math.tan, 1, 1),
    "min": (lambda *xs: min(xs), 1, None), "max": (lambda *xs: max(xs), 1, None),
}  # fmt: skip
_ARITHMETIC_HELP = (
    "numbers, + - * / // % **, parentheses, pi, e and the functions sqrt, abs, round, log, "
    "log10, sin, cos, tan, min and max"
)


def _real(value: object, what: str) -> float:
    """``value`` as a finite float; complex, infinite and NaN answers are refused."""
    if isinstance(value, complex):
        raise ValueError(f"{what} is not a real number")
    if not isinstance(value, int | float):
        raise ValueError(f"{what} is not a number")
    try:
        number_value = float(value)
    except OverflowError:
        raise ValueError(f"{what} is out of range") from None
    if not math.isfinite(number_value):
        raise ValueError(f"{what} is out of range")
    return number_value


def _call(name: str, args: list[float]) -> float:
    function, fewest, most = _FUNCS[name]
    if len(args) < fewest or (most is not None and len(args) > most):
        wanted = str(fewest) if fewest == most else f"{fewest} or more" if most is None else (
            f"{fewest} to {most}")  # fmt: skip
        raise ValueError(f"{name}() takes {wanted} argument(s), got {len(args)}")
    if name == "round" and len(args) == 2:
        if not args[1].is_integer() or abs(args[1]) > 400:
            raise ValueError("round()'s digits must be a whole number from -400 to 400")
        return _real(round(args[0], int(args[1])), "round()")
    try:
        result = function(*args)
    except (ValueError, ZeroDivisionError):  # math's "domain error", log(x, 1)
        raise ValueError(f"{name}() is undefined for these arguments") from None
    except OverflowError:
        raise ValueError(f"{name}() is out of range for these arguments") from None
    return _real(result, f"{name}()")


def _eval(node: ast.AST) -> float:
    # A whitelist walk: numbers, arithmetic, a few functions, pi and e. Nothing else runs.
    # Every step is a finite real number, so no step can raise anything but ValueError.
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ValueError("booleans are not numbers here")
        return _real(node.value, "a number in the expression")
    if isinstance(node, ast.Name) and node.id in ("pi", "e"):
        return math.pi if node.id == "pi" else math.e
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ValueError("exponent too large")
        try:
            return _real(_OPS[type(node.op)](left, right), "the result")
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        except OverflowError:
            raise ValueError("the result is out of range") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _real(_OPS[type(node.op)](_eval(node.operand)), "the result")
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
    ):
        return _call(node.func.id, [_eval(arg) for arg in node.args])
    raise ValueError(f"unsupported expression element: {type(node).__name__}")


def evaluate_arithmetic(args: Args) -> JSONValue:
    expression = text_arg(args, "expression")
    if len(expression) > 500:
        raise ValueError("expression longer than 500 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as err:
        raise ValueError(f"cannot parse expression: {err.msg}") from err
    except (RecursionError, MemoryError):
        raise ValueError("expression nested too deeply") from None
    try:
        value = _eval(tree)
    except RecursionError:
        raise ValueError("expression nested too deeply") from None
    # Whole numbers are written as integers while a float still counts them exactly.
    exact = value.is_integer() and abs(value) <= 2**53
    return {"expression": expression, "value": int(value) if exact else value}


_ROMAN = ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
          (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))  # fmt: skip


def roman_numerals(args: Args) -> JSONValue:
    value = args.get("value")
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= 3999:
            raise ValueError("Roman numerals cover 1 to 3999")
        out, rest = [], value
        for amount, letters in _ROMAN:
            count, rest = divmod(rest, amount)
            out.append(letters * count)
        return {"roman": "".join(out), "number": value}
    text = str(value).upper().strip()
    total, index = 0, 0
    for amount, letters in _ROMAN:
        while text.startswith(letters, index):
            total += amount
            index += len(letters)
    converted = roman_numerals({"value": total}) if total else None
    if index != len(text) or not isinstance(converted, dict) or converted["roman"] != text:
        raise ValueError(f"{quoted(value)} is not a well-formed Roman numeral")
    return {"roman": text, "number": total}


def number_base(args: Args) -> JSONValue:
    text = text_arg(args, "value").strip().lower()
    source, target = int_arg(args, "from_base"), int_arg(args, "to_base")
    try:
        number_value = int(text, source)
    except ValueError as err:
        raise ValueError(f"{quoted(text)} is not a base-{source} number") from err
    if not -(2**63) <= number_value < 2**63:
        raise ValueError("'value' must fit in a signed 64-bit integer")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    sign, n, out = ("-" if number_value < 0 else ""), abs(number_value), ""
    while True:
        n, remainder = divmod(n, target)
        out = digits[remainder] + out
        if n == 0:
            break
    return {"value": sign + out, "decimal": number_value}


def password_strength(args: Args) -> JSONValue:
    password = text_arg(args, "password")
    pools = [(r"[a-z]", 26), (r"[A-Z]", 26), (r"\d", 10), (r"[^A-Za-z0-9]", 33)]
    pool = sum(size for pattern, size in pools if re.search(pattern, password))
    bits = len(password) * math.log2(pool) if pool else 0.0
    advice: list[str] = []
    if len(password) < 12:
        advice.append("use at least 12 characters")
    if re.search(r"(.)\1\1", password):
        advice.append("avoid runs of the same character")
    if password.lower() in {"password", "123456", "qwerty", "letmein", "admin"}:
        bits, advice = 0.0, [*advice, "this is one of the most common passwords"]
    rating = (
        "weak" if bits < 40 else "fair" if bits < 60 else "strong" if bits < 90 else "very strong"
    )
    # The password itself is never echoed back.
    return {"entropy_bits": round(bits, 1), "rating": rating, "advice": advice}


def percent_change(args: Args) -> JSONValue:
    old, new = num_arg(args, "old_value"), num_arg(args, "new_value")
    if old == 0:
        raise ValueError("percent change from zero is undefined")
    change = (new - old) / abs(old) * 100
    if not math.isfinite(change):
        raise ValueError("the percent change is too large to report: 'old_value' is too near 0")
    return {"percent_change": round(change, 4), "difference": new - old}


def gcd_lcm(args: Args) -> JSONValue:
    raw = args.get("numbers")
    if not isinstance(raw, list) or not raw:
        raise ValueError("'numbers' must be a non-empty list of integers")
    values = [int(v) for v in raw if isinstance(v, int | float) and float(v).is_integer()]
    if len(values) != len(raw):
        raise ValueError("every item of 'numbers' must be a whole number")
    lcm = math.lcm(*values)
    if lcm >= 2**63:
        raise ValueError("the least common multiple is too large to report (beyond 64 bits)")
    return {"gcd": math.gcd(*values), "lcm": lcm}


CASES = ("upper", "lower", "title", "sentence", "snake", "kebab", "camel", "pascal")

# fmt: off
SPECS: tuple[Spec, ...] = group(
    "utilities",
    tool("count_words", "Words, characters, sentences and reading time of a text.",
         [TEXT], compute=word_count),
    tool("slugify_text", "A lowercase, dash-separated URL slug for a title.",
         [string("text", "Title or phrase.", example="Quarterly Report: Q1 2025!"),
          integer("max_length", "Longest slug allowed.", required=False, minimum=1,
                  maximum=200)],
         compute=slugify),
    tool("change_text_case", "Rewrite text in another case style (snake, camel, title, ...).",
         [string("text", "Text to convert.", example="customer lifetime value"),
          choice("style", "Target style.", CASES)],
         compute=change_case),
    tool("encode_base64", "Base64-encode UTF-8 text.",
         [string("text", "Text to encode.", min_length=0, example="hello world"),
          boolean("url_safe", "Use the URL-safe alphabet.")],
         compute=b64_encode),
    tool("decode_base64", "Decode base64 (standard or URL-safe) back to text.",
         [string("encoded", "Base64 text.", example="aGVsbG8gd29ybGQ=")], compute=b64_decode),
    tool("encode_url_component", "Percent-encode text for use inside a URL.",
         [string("text", "Text to encode.", example="a&b=c d")], compute=url_encode),
    tool("decode_url_component", "Decode percent-encoded URL text.",
         [string("encoded", "Encoded text.", example="a%26b%3Dc%20d")], compute=url_decode),
    tool("parse_url", "Split a URL into scheme, host, port, path, query and fragment.",
         [string("url", "URL.", example="https://shop.example.com:8443/cart?id=42&coupon=VIP#pay")],
         compute=parse_url),
    tool("extract_contact_details", "Email addresses, URLs and phone numbers found in a text.",
         [string("text", "Text to scan.",
                 example="Write to ana@example.com or call +351 912 345 678.")],
         compute=extract_contacts),
    tool("mask_personal_data", "Replace email addresses and phone numbers in a text with tags.",
         [string("text", "Text to clean.",
                 example="Contact Ana at ana@example.com or +351 912 345 678.")],
         compute=mask_pii),
    tool("validate_email_address", "Check that an email address is well formed, with reasons.",
         [string("email", "Address to check.", example="ana.ribeiro@example.com")],
         compute=validate_email_address),
    tool("format_phone_number", "Normalise a phone number to E.164.",
         [string("number", "Phone number as typed.", example="912 345 678"),
          string("country_calling_code", "Calling code for numbers without one.",
                 required=False, pattern="^\\+?[0-9]{1,3}$", example="+351")],
         compute=format_phone),
    tool("detect_language", "Guess the language of a text from common words.",
         [TEXT], compute=detect_language),
    tool("summarize_text", "Keep the most representative sentences of a text.",
         [TEXT, integer("sentences", "Sentences to keep.", required=False, minimum=1,
                        maximum=20, default=2)],
         compute=summarize),
    tool("truncate_text", "Shorten text to a length, optionally at a word boundary.",
         [TEXT, integer("max_characters", "Maximum length.", minimum=1, maximum=1_000_000,
                        example=40),
          boolean("whole_words", "Do not cut a word in half.", default=True)],
         compute=truncate),
    tool("diff_texts", "Unified diff and similarity ratio of two texts.",
         [string("before", "Original text.", min_length=0, example="alpha\nbeta\n"),
          string("after", "Changed text.", min_length=0, example="alpha\ngamma\n")],
         compute=text_diff),
    tool("generate_name_based_uuid", "A stable UUID (version 5) for a name in a namespace.",
         [string("name", "Name to derive from.", example="example.com"),
          choice("namespace", "Namespace.", ("dns", "url", "oid"), required=False,
                 default="dns")],
         compute=name_uuid),
    tool("parse_csv_text", "Turn CSV text with a header row into a list of records.",
         [string("csv", "CSV text.", example="name,qty\nbolts,12\nnuts,30\n"),
          string("delimiter", "Field delimiter.", required=False, min_length=1, max_length=1,
                 default=",")],
         compute=csv_to_json),
    tool("validate_json", "Check that text is valid JSON; returns its canonical form.",
         [string("json", "JSON text.", example='{"b": 1, "a": [true, null]}')],
         compute=json_check),
    tool("compare_versions", "Compare two semantic versions and name the part that differs.",
         [string("a", "First version.", example="1.4.2"),
          string("b", "Second version.", example="1.10.0")],
         compute=semver_compare),
    tool("convert_units", "Convert length, mass, volume, speed or data-size units.",
         [number("value", "Amount to convert.", minimum=-MAX_MAGNITUDE, maximum=MAX_MAGNITUDE,
                 example=5),
          choice("from_unit", "Unit of the amount.", ALL_UNITS),
          choice("to_unit", "Unit to convert to.", ALL_UNITS)],
         compute=convert_units),
    tool("evaluate_arithmetic", "Evaluate an arithmetic expression safely (+ - * / ** sqrt ...).",
         [string("expression", f"Expression: {_ARITHMETIC_HELP}. Results must be finite real "
                 "numbers.", max_length=500, example="(2 + 3) * sqrt(16) / 4")],
         compute=evaluate_arithmetic),
    tool("convert_roman_numeral", "Convert between Roman numerals and integers (1-3999).",
         [Param("value", {"description": "An integer 1-3999, or a Roman numeral like 'MCMXC'.",
                          "oneOf": [{"type": "integer", "minimum": 1, "maximum": 3999},
                                    {"type": "string", "pattern": "^[IVXLCDMivxlcdm]+$"}],
                          "examples": [1990]})],
         compute=roman_numerals),
    tool("convert_number_base", "Convert an integer between bases 2-36.",
         [string("value", "Number written in the source base; it must fit in a signed 64-bit "
                 "integer.", max_length=80, example="ff"),
          integer("from_base", "Source base.", minimum=2, maximum=36, example=16),
          integer("to_base", "Target base.", minimum=2, maximum=36, example=2)],
         compute=number_base),
    tool("check_password_strength", "Estimate a password's entropy and suggest improvements.",
         [string("password", "Password to rate (never stored or echoed).",
                 example="correct-horse-battery-staple")],
         compute=password_strength),
    tool("calculate_percent_change", "Percentage change between an old and a new value.",
         [number("old_value", "Before.", minimum=-MAX_MAGNITUDE, maximum=MAX_MAGNITUDE,
                 example=80),
          number("new_value", "After.", minimum=-MAX_MAGNITUDE, maximum=MAX_MAGNITUDE,
                 example=92)],
         compute=percent_change),
    tool("calculate_gcd_lcm", "Greatest common divisor and least common multiple.",
         [numbers("numbers", "Whole numbers.", max_items=100, minimum=-MAX_MAGNITUDE,
                  maximum=MAX_MAGNITUDE, example=[12, 18, 30])],
         compute=gcd_lcm),
)
# fmt: on
