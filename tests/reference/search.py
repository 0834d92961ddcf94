"""Plain-Python statement of the tool search semantics, the oracle for the Rust BM25 index.

Written from the specification in ``rust/search.rs`` (module doc), not by calling the core:

- Words are runs of alphanumeric characters; anything else separates. A run is also split before
  an uppercase letter that follows a lowercase letter or a digit (``getWeatherNow``,
  ``oauth2Token``) and before the last capital of an acronym when a lowercase letter follows it
  (``HTTPServer`` -> ``http``, ``server``). Words are lowercased.
- Words in :data:`STOP_WORDS` are dropped from tools and queries alike.
- The full term of a word is its Snowball English stem when the word is ASCII, else the word.
- A word longer than :data:`PREFIX_CHARS` characters also has a prefix term, ``#`` and its first
  :data:`PREFIX_CHARS` characters, counting :data:`PREFIX_WEIGHT` of a full term.
- BM25 with fielded weights (name :data:`NAME_WEIGHT`, description :data:`DESCRIPTION_WEIGHT`),
  ``K1``/``B`` length normalisation, ``K3`` query term saturation; ties keep index order.

The float arithmetic is written in the same order as the Rust code (occurrence-order sums,
full terms before prefix terms, a plain left-to-right sum of lengths instead of ``sum()``, whose
compensated summation on Python 3.12+ would round differently), so scores are normally
bit-identical and always agree to well within ``1e-9`` relative.

Character classes. Rust's ``char::is_alphanumeric`` is the Unicode ``Alphabetic`` property or a
``N*`` general category; ``is_numeric`` is the ``Nd``/``Nl``/``No`` categories; ``is_uppercase``
and ``is_lowercase`` are the ``Uppercase`` and ``Lowercase`` properties. Python's ``str``
predicates differ on some exotic characters: ``isalnum`` misses ``Other_Alphabetic`` marks
(e.g. U+0345, Devanagari vowel signs, circled letters), and ``isnumeric`` accepts CJK numerals
such as ``一`` (category ``Lo``). This module reads the general category for "numeric" (so ``一``
agrees) and uses ``isalpha``/``isupper``/``islower`` on single characters otherwise. The two
Unicode databases may also be different versions. Generated test text therefore sticks to
characters where both agree: ASCII letters, digits, punctuation, whitespace and NUL, a few
Latin letters (``é ü ß Ä ẞ``), ``²``, Greek (both sigmas, so final-sigma lowercasing is
exercised), and a few CJK ideographs including the numerals ``一 二``; arbitrary Unicode is only
used for properties that do not compare against this module.

Text crossing into the core is read with PyO3's ``to_string_lossy``: each lone surrogate turns
into three U+FFFD (its three surrogate-pass UTF-8 bytes, each invalid on its own). :func:`lossy`
does the same, so byte cuts agree even on such strings.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

import snowballstemmer  # type: ignore[import-untyped]

K1: Final[float] = 1.2
B: Final[float] = 0.75
K3: Final[float] = 1.0
NAME_WEIGHT: Final[float] = 3.0
DESCRIPTION_WEIGHT: Final[float] = 1.0
PREFIX_CHARS: Final[int] = 4
PREFIX_WEIGHT: Final[float] = 0.5

DEFAULT_TOP_K: Final[int] = 16
MAX_TOP_K: Final[int] = 64
DEFAULT_MAX_QUERY_BYTES: Final[int] = 4096
MAX_QUERY_BYTES_CEILING: Final[int] = 65536

# The Rust core's list, word for word.
STOP_WORDS: Final[frozenset[str]] = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just",
    "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
))  # fmt: skip

_NUMERIC_CATEGORIES: Final[frozenset[str]] = frozenset(("Nd", "Nl", "No"))
_STEMMER = snowballstemmer.stemmer("english")

# Previous character inside the current run: none, lower case or digit, upper case.
_NONE, _LOWER, _UPPER = 0, 1, 2


def _is_numeric(ch: str) -> bool:
    return unicodedata.category(ch) in _NUMERIC_CATEGORIES


def _is_alphanumeric(ch: str) -> bool:
    return ch.isalpha() or _is_numeric(ch)


def lossy(text: str) -> str:
    """``text`` as the core reads it: every lone surrogate becomes three U+FFFD."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def cut_query(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, at a character boundary."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    end = max_bytes
    while end > 0 and encoded[end] & 0xC0 == 0x80:  # a continuation byte is no boundary
        end -= 1
    return encoded[:end].decode("utf-8")


def words(text: str) -> list[str]:
    """The lowercased words of ``text`` after camelCase splitting, stop words kept."""
    found: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            found.append("".join(current).lower())
            current.clear()

    previous = _NONE
    for position, ch in enumerate(text):
        if not _is_alphanumeric(ch):
            flush()
            previous = _NONE
            continue
        upper = ch.isupper()
        if upper and current:
            following = text[position + 1] if position + 1 < len(text) else ""
            acronym_end = (
                previous == _UPPER
                and following != ""
                and following.islower()
                and _is_alphanumeric(following)
            )
            if previous == _LOWER or acronym_end:
                flush()
        current.append(ch)
        if upper:
            previous = _UPPER
        elif ch.islower() or _is_numeric(ch):
            previous = _LOWER
        else:
            previous = _NONE
    flush()
    return found


@lru_cache(maxsize=8192)
def full_term(word: str) -> str:
    """The Snowball English stem of an ASCII word; any other word stands for itself."""
    return str(_STEMMER.stemWord(word)) if word.isascii() else word


def prefix_term(word: str) -> str | None:
    """``#`` and the first ``PREFIX_CHARS`` characters, for words longer than that."""
    if len(word) <= PREFIX_CHARS:
        return None
    return "#" + word[:PREFIX_CHARS]


def analyze(text: str) -> list[str]:
    """Full terms of the non-stop words of ``text``, in order."""
    return [full_term(word) for word in words(text) if word not in STOP_WORDS]


class ReferenceIndex:
    """BM25 over ``(name, description)`` pairs, in order; the same answers as the Rust index."""

    def __init__(self, tools: Sequence[tuple[str, str]]) -> None:
        self.names: list[str] = []
        seen: set[str] = set()
        # term -> [[doc, weighted tf], ...] in doc order
        raw: dict[str, list[list[float]]] = {}
        lengths: list[float] = []
        for doc, (name, description) in enumerate(tools):
            name, description = lossy(name), lossy(description)
            if name in seen:
                raise ValueError(f"tool search index got the tool name {name!r} twice")
            seen.add(name)
            self.names.append(name)
            length = 0.0
            for text, weight in ((name, NAME_WEIGHT), (description, DESCRIPTION_WEIGHT)):
                for word in words(text):
                    if word in STOP_WORDS:
                        continue
                    occurrences = [(full_term(word), weight)]
                    prefix = prefix_term(word)
                    if prefix is not None:
                        occurrences.append((prefix, weight * PREFIX_WEIGHT))
                    for term, amount in occurrences:
                        postings = raw.setdefault(term, [])
                        if postings and postings[-1][0] == doc:
                            postings[-1][1] += amount
                        else:
                            postings.append([doc, amount])
                        length += amount
            lengths.append(length)

        total = 0.0
        for length in lengths:  # left to right, as Rust's `Iterator::sum`
            total += length
        count = float(len(lengths))
        average = total / count if lengths else 1.0
        self._impacts: dict[str, list[tuple[int, float]]] = {}
        self._docs: dict[str, frozenset[int]] = {}
        for term, postings in raw.items():
            df = float(len(postings))
            idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            impacts: list[tuple[int, float]] = []
            for doc_number, tf in postings:
                doc = int(doc_number)
                norm = tf + K1 * (1.0 - B + B * lengths[doc] / average)
                impacts.append((doc, idf * (tf * (K1 + 1.0) / norm)))
            self._impacts[term] = impacts
            self._docs[term] = frozenset(doc for doc, _ in impacts)

    def __len__(self) -> int:
        return len(self.names)

    def search(
        self, query: str, k: int = DEFAULT_TOP_K, max_query_bytes: int = DEFAULT_MAX_QUERY_BYTES
    ) -> list[tuple[str, float, tuple[str, ...]]]:
        """``(name, score, matched)`` of the best ``k`` tools, best first, ties in index order."""
        if not 1 <= k <= MAX_TOP_K:
            raise ValueError(f"k must be between 1 and {MAX_TOP_K}, got {k}")
        if not 1 <= max_query_bytes <= MAX_QUERY_BYTES_CEILING:
            raise ValueError(
                f"max_query_bytes must be between 1 and {MAX_QUERY_BYTES_CEILING}, "
                f"got {max_query_bytes}"
            )
        text = cut_query(lossy(query), max_query_bytes)

        distinct: dict[str, None] = {}  # distinct non-stop words, query order
        full_counts: dict[str, int] = {}  # known full terms, first-occurrence order
        prefix_counts: dict[str, int] = {}  # known prefix terms, first-occurrence order
        for word in words(text):
            if word in STOP_WORDS:
                continue
            distinct.setdefault(word)
            full = full_term(word)
            if full in self._impacts:
                full_counts[full] = full_counts.get(full, 0) + 1
            prefix = prefix_term(word)
            if prefix is not None and prefix in self._impacts:
                prefix_counts[prefix] = prefix_counts.get(prefix, 0) + 1
        if not full_counts and not prefix_counts:
            return []

        scores: dict[int, float] = {}
        for counts, field_weight in ((full_counts, 1.0), (prefix_counts, PREFIX_WEIGHT)):
            for term, occurrences in counts.items():
                qtf = float(occurrences)
                weight = field_weight * ((K3 + 1.0) * qtf / (K3 + qtf))
                for doc, impact in self._impacts[term]:
                    scores[doc] = scores.get(doc, 0.0) + weight * impact
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [(self.names[doc], score, self._matched(doc, distinct)) for doc, score in ranked]

    def _matched(self, doc: int, distinct: dict[str, None]) -> tuple[str, ...]:
        """Query words whose full or prefix term is in ``doc``, in query order."""
        empty: frozenset[int] = frozenset()
        matched: list[str] = []
        for word in distinct:
            prefix = prefix_term(word)
            if doc in self._docs.get(full_term(word), empty) or (
                prefix is not None and doc in self._docs.get(prefix, empty)
            ):
                matched.append(word)
        return tuple(matched)
