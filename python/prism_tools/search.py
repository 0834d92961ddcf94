"""Lexical tool search: a BM25 index over tool names and descriptions, built in the Rust core.

``ToolSearchIndex(tools, *, max_indexed=1024, max_query_bytes=4096)`` takes ``ToolDefinition``\\ s
or a ``ToolRegistry`` (in registry order); ``index.search(query, k=16)`` returns ``SearchHit``\\ s
(``name``, ``score``, ``matched``), best first, ties in index order. The tokeniser, stop words,
stemmer, prefix terms and every scoring constant are described in ``docs/search.md``.
"""

from __future__ import annotations

from typing import Final

from prism_tools._core import (
    SEARCH_DEFAULT_MAX_INDEXED,
    SEARCH_DEFAULT_MAX_QUERY_BYTES,
    SEARCH_DEFAULT_TOP_K,
    SEARCH_MAX_INDEXED_CEILING,
    SEARCH_MAX_QUERY_BYTES_CEILING,
    SEARCH_MAX_TOP_K,
    SearchHit,
    ToolSearchCapacityError,
    ToolSearchIndex,
)

DEFAULT_TOP_K: Final[int] = SEARCH_DEFAULT_TOP_K
MAX_TOP_K: Final[int] = SEARCH_MAX_TOP_K
DEFAULT_MAX_INDEXED: Final[int] = SEARCH_DEFAULT_MAX_INDEXED
MAX_INDEXED_CEILING: Final[int] = SEARCH_MAX_INDEXED_CEILING
DEFAULT_MAX_QUERY_BYTES: Final[int] = SEARCH_DEFAULT_MAX_QUERY_BYTES
MAX_QUERY_BYTES_CEILING: Final[int] = SEARCH_MAX_QUERY_BYTES_CEILING

__all__ = [
    "DEFAULT_MAX_INDEXED",
    "DEFAULT_MAX_QUERY_BYTES",
    "DEFAULT_TOP_K",
    "MAX_INDEXED_CEILING",
    "MAX_QUERY_BYTES_CEILING",
    "MAX_TOP_K",
    "SearchHit",
    "ToolSearchCapacityError",
    "ToolSearchIndex",
]
