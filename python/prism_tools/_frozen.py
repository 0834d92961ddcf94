"""A faster ``__init__`` for frozen slotted dataclasses.

``dataclass(frozen=True)`` writes every field through ``object.__setattr__`` by name, about
0.05-0.1 µs a field; a ``ToolResult`` built on every call, or a twenty-field ledger row, would
spend more there than the rest of dispatch. ``fast_init`` swaps the generated ``__init__`` for one
that briefly moves the new instance to a mutable twin class (a subclass that adds no slots;
CPython allows ``__class__`` assignment between classes of identical layout), stores the fields
with plain attribute writes, and moves it back. The class stays a frozen dataclass in every other
respect: ``__setattr__`` still raises, ``fields``/``replace``/``asdict``/``==``/``hash`` behave as
usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_BUILDERS: dict[type, Callable[..., Any]] = {}
_TWINS: dict[type, type] = {}


def builder(cls: type[T]) -> Callable[..., T]:
    """A positional constructor for a ``fast_init`` class that skips its ``__init__``.

    Every field must be passed, in declaration order, and nothing is checked (``__post_init__``
    does not run): for the hot path only, where the harness itself supplies valid values. It
    saves about a third of the cost of ``cls(...)``.
    """
    return _BUILDERS[cls]


def twin(cls: type[T]) -> type[Any]:
    """The mutable twin of a ``fast_init`` class, for building an instance in place.

    Call it, assign every field, then set ``__class__`` to ``cls``; the same contract as
    ``builder`` (nothing checked), minus the cost of a call that passes every field. Only for
    the few hottest objects, where that call shows.
    """
    return _TWINS[cls]


def fast_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of a frozen, slotted dataclass with a faster one."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    slots = tuple(getattr(cls, "__slots__", ()))
    if not slots or cls.__bases__ != (object,):
        raise TypeError("fast_init needs a slotted dataclass that derives from object only")
    # The twin derives from the class and adds no slots, so CPython's layout check for the
    # ``__class__`` swap stops at their shared base instead of comparing every slot name (a
    # third of the swap's cost for a twenty-field row). It writes like a plain object.
    mutable = type(
        f"_{cls.__name__}Builder",
        (cls,),
        {
            "__slots__": (),
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
            "__init__": object.__init__,
        },
    )
    namespace: dict[str, Any] = {"_twin": mutable, "_cls": cls, "_set_class": object.__setattr__}
    params: list[str] = []
    body = ["    _set_class(self, '__class__', _twin)"]
    for field in fields:
        if not field.init:
            raise TypeError(f"fast_init does not support init=False fields ({field.name})")
        if field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"fast_init does not support default factories ({field.name})")
        if field.default is dataclasses.MISSING:
            params.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            params.append(f"{field.name}=_default_{field.name}")
        body.append(f"    self.{field.name} = {field.name}")
    body.append("    self.__class__ = _cls")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body)
    exec(source, namespace)
    # ``_twin()`` rather than ``object.__new__(_twin)``: calling a class without ``__init__`` is
    # the cheaper way to allocate it.
    names = [field.name for field in fields]
    build_source = (
        f"def build({', '.join(names)}):\n    self = _twin()\n"
        + "".join(f"    self.{name} = {name}\n" for name in names)
        + "    self.__class__ = _cls\n    return self"
    )
    exec(build_source, namespace)
    _BUILDERS[cls] = namespace["build"]
    _TWINS[cls] = mutable
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
