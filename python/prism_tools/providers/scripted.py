"""``ScriptedProvider``: a provider that replays fixed responses, for tests and the demo."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeAlias

from prism_tools.errors import PrismError
from prism_tools.messages import ProviderRequest, ProviderResponse

ScriptStep: TypeAlias = (
    "ProviderResponse | BaseException | Callable[[ProviderRequest], ProviderResponse]"
)


class ScriptExhaustedError(PrismError):
    """The runtime asked a ``ScriptedProvider`` for more turns than it was given."""

    code = "ERR_PRISM_SCRIPT_EXHAUSTED"


class ScriptedProvider:
    """Returns the scripted responses in order and records every request in ``requests``.

    A step may be a ``ProviderResponse``, an exception to raise (a provider failure), or a
    function of the request that returns the response (to answer based on what was sent).
    """

    def __init__(self, responses: Iterable[ScriptStep]) -> None:
        self._steps = list(responses)
        self.requests: list[ProviderRequest] = []

    @property
    def remaining(self) -> int:
        """Scripted steps not used yet."""
        return len(self._steps) - len(self.requests)

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        turn = len(self.requests)
        self.requests.append(request)
        if turn >= len(self._steps):
            raise ScriptExhaustedError(
                f"scripted provider has {len(self._steps)} responses; "
                f"turn {turn + 1} asked for more"
            )
        step = self._steps[turn]
        if isinstance(step, BaseException):
            raise step
        if callable(step) and not isinstance(step, ProviderResponse):
            return step(request)
        return step


__all__ = ["ScriptExhaustedError", "ScriptStep", "ScriptedProvider"]
