"""A faster ``__init__`` for frozen slotted dataclasses.

``dataclass(frozen=True)`` writes every field through ``object.__setattr__`` by name, which costs
about 0.1 µs a field; a ``ToolResult`` built on every call would spend more there than the rest of
dispatch. Slot member descriptors can be written directly, so ``fast_init`` swaps the generated
``__init__`` for one that calls each slot's ``__set__``. The class stays a frozen dataclass in
every other respect: ``__setattr__`` still raises, ``fields``/``replace``/``asdict`` still work.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of a frozen, slotted dataclass with a direct slot writer."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    namespace: dict[str, Any] = {}
    params: list[str] = []
    body: list[str] = []
    for field in fields:
        if not field.init:
            raise TypeError(f"fast_init does not support init=False fields ({field.name})")
        if field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"fast_init does not support default factories ({field.name})")
        setter = f"_set_{field.name}"
        namespace[setter] = cls.__dict__[field.name].__set__
        if field.default is dataclasses.MISSING:
            params.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            params.append(f"{field.name}=_default_{field.name}")
        body.append(f"    {setter}(self, {field.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc]
    return cls
