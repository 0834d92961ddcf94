"""Plain-Python statement of the filter semantics, the oracle for the Rust filter."""

from __future__ import annotations

from collections.abc import Sequence


def permits(name: str, filters: Sequence[tuple[Sequence[str], Sequence[str]]]) -> bool:
    """A name passes iff no deny list holds it and every non-empty allow list does."""
    if any(name in deny for _, deny in filters):
        return False
    return all(not allow or name in allow for allow, _ in filters)
