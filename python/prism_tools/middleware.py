"""Middleware around dispatch: ``tool_call`` sees the call before any check, ``tool_result`` sees
the result right after the tool returns.

A middleware is ``fn(value, next)``, sync or async. It may return a replacement value, or call
``next(value)`` to hand one on (then that value wins, whatever it returns). Middlewares run in
registration order. Under the default ``error_policy="event"`` a middleware that raises or returns
the wrong type is reported and skipped (the chain keeps the value it had); under ``"throw"`` it
raises ``MiddlewareError``. A middleware that returns something other than what it passed to
``next`` is reported under either policy, and the value it passed to ``next`` wins.
Calling ``next`` twice is always an error. Whatever a ``tool_call`` middleware does, dispatch
checks the call it produces from scratch: renaming cannot escape a filter.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from prism_tools.errors import MiddlewareError
from prism_tools.types import ToolCall, ToolResult

MiddlewareHook = Literal["tool_call", "tool_result"]
ErrorPolicy = Literal["event", "throw"]
Middleware = Callable[[Any, Callable[..., Any]], Any]
"""``fn(value, next)``: ``next(new_value)`` hands a value on; ``next()`` hands on the current."""

_EXPECTED: dict[str, type] = {"tool_call": ToolCall, "tool_result": ToolResult}

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MiddlewareDiagnostic:
    """A middleware problem reported instead of raised (``error_policy="event"``)."""

    hook: str
    index: int
    message: str
    error: BaseException | None = None


DiagnosticSink = Callable[[MiddlewareDiagnostic], "Awaitable[None] | None"]


class MiddlewareRegistry:
    """Ordered middleware chains per hook."""

    __slots__ = ("_chains", "error_policy", "on_error")

    def __init__(
        self, *, error_policy: ErrorPolicy = "event", on_error: DiagnosticSink | None = None
    ) -> None:
        if error_policy not in ("event", "throw"):
            raise ValueError('error_policy must be "event" or "throw"')
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be a function, got {type(on_error).__name__}")
        self.error_policy: ErrorPolicy = error_policy
        self.on_error = on_error
        self._chains: dict[str, list[Middleware]] = {"tool_call": [], "tool_result": []}

    def use(self, hook: MiddlewareHook, fn: Middleware) -> MiddlewareRegistry:
        """Append ``fn`` to the ``hook`` chain; returns the registry for chaining."""
        if hook not in self._chains:
            raise ValueError(f'unknown middleware hook {hook!r}; use "tool_call" or "tool_result"')
        if not callable(fn):
            raise TypeError("middleware must be callable as fn(value, next)")
        self._chains[hook].append(fn)
        return self

    def has(self, hook: MiddlewareHook) -> bool:
        """True when the hook has at least one middleware."""
        return bool(self._chains.get(hook))

    def __len__(self) -> int:
        return sum(len(chain) for chain in self._chains.values())

    async def run(
        self, hook: MiddlewareHook, value: Any, *, report: DiagnosticSink | None = None
    ) -> Any:
        """Pass ``value`` through the hook's chain and return the final value."""
        expected = _EXPECTED[hook]
        for index, fn in enumerate(list(self._chains[hook])):
            handed: list[Any] = []

            def next_(
                new_value: Any = value, _handed: list[Any] = handed, _index: int = index
            ) -> Any:
                if _handed:
                    raise MiddlewareError(
                        f'Middleware hook "{hook}" #{_index}: next() called more than once'
                    )
                _handed.append(new_value)
                return new_value

            try:
                returned = fn(value, next_)
                if inspect.isawaitable(returned):
                    returned = await returned
            except MiddlewareError:
                raise
            except Exception as err:
                await self._problem(hook, index, f"raised {type(err).__name__}", err, report)
                continue
            if handed:
                if returned is not None and returned is not handed[0]:
                    await self._problem(
                        hook,
                        index,
                        "returned a different value than it passed to next()",
                        None,
                        report,
                        raise_under_throw=False,
                    )
                candidate = handed[0]
            elif returned is None:
                continue
            else:
                candidate = returned
            if not isinstance(candidate, expected):
                await self._problem(
                    hook,
                    index,
                    f"produced {type(candidate).__name__}, expected {expected.__name__}",
                    None,
                    report,
                )
                continue
            value = candidate
        return value

    async def _problem(
        self,
        hook: str,
        index: int,
        message: str,
        error: BaseException | None,
        report: DiagnosticSink | None,
        *,
        raise_under_throw: bool = True,
    ) -> None:
        text = f'Middleware hook "{hook}" #{index}: {message}'
        if self.error_policy == "throw" and raise_under_throw:
            raise MiddlewareError(text) from error
        diagnostic = MiddlewareDiagnostic(hook, index, text, error)
        for sink in (self.on_error, report):
            if sink is None:
                continue
            try:
                outcome = sink(diagnostic)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                # A report observes the skip; one that fails cannot stop the call or escape it.
                logger.exception("middleware error sink failed")


def create_middleware_registry(
    *, error_policy: ErrorPolicy = "event", on_error: DiagnosticSink | None = None
) -> MiddlewareRegistry:
    """An empty ``MiddlewareRegistry``."""
    return MiddlewareRegistry(error_policy=error_policy, on_error=on_error)
