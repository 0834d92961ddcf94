"""Artifacts for the generate-validate-revise loop: parse the model's text, check it, ask again.

A host gives a ``validator`` (and optionally a ``parser`` and a ``repairer``). Each call-free
model answer is a candidate: parsed, validated, and either accepted (the run's ``artifact``) or
sent back with the problems for a revision, at most ``max_revisions`` times.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, TypeAlias

from prism_tools import _json
from prism_tools.errors import PrismError
from prism_tools.messages import Message, user_messages
from prism_tools.redaction import Redactor
from prism_tools.types import JSONValue, items_of

NO_ARTIFACT_TEXT: Final = "no artifact text in model output"
PARSE_FAILED: Final = "artifact parse failed"
TOOL_ROUND_LIMIT: Final = "maximum tool rounds exceeded"
NO_VALIDATED_ARTIFACT: Final = "artifact loop ended without a validated artifact"
UNREADABLE_VALIDATION: Final = "the validator's answer could not be read"
ARTIFACT_FAILED: Final = "artifact_failed"


def _metadata(value: Any, owner: str) -> dict[str, JSONValue] | None:
    """``metadata`` as a dict of its own, or a ``TypeError`` naming ``owner`` unless it is a
    mapping (or None). Copied when built: a run that reads it later cannot fail on it."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{owner}.metadata must be a mapping, got {type(value).__name__}")
    return dict(value)


@dataclass(frozen=True, slots=True)
class ArtifactIssue:
    """One problem with a candidate: what is wrong, and where (a JSON path, ``$`` for all)."""

    message: str
    path: str = "$"
    metadata: Mapping[str, JSONValue] | None = None

    def __post_init__(self) -> None:
        # The message goes back to the model in a revision request: text, or refused here.
        if not isinstance(self.message, str):
            raise TypeError(
                f"ArtifactIssue.message must be a string, got {type(self.message).__name__}"
            )
        if not isinstance(self.path, str):
            raise TypeError(f"ArtifactIssue.path must be a string, got {type(self.path).__name__}")
        object.__setattr__(self, "metadata", _metadata(self.metadata, "ArtifactIssue"))

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {"message": self.message, "path": self.path}
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        return out


@dataclass(frozen=True, slots=True)
class ArtifactCheck:
    """The verdict of a parser or validator: ``ok`` with a ``value``, or ``errors``.

    Checked when built, so a verdict cannot pass by accident or fail the run when read: ``ok``
    must be ``True`` or ``False`` (not a truthy stranger such as ``"no"``), ``errors``
    ``ArtifactIssue`` objects, ``metadata`` a mapping (copied); else a ``TypeError``."""

    ok: bool
    value: Any = None
    errors: tuple[ArtifactIssue, ...] = ()
    metadata: Mapping[str, JSONValue] | None = None

    def __post_init__(self) -> None:
        if type(self.ok) is not bool:
            raise TypeError(f"ArtifactCheck.ok must be True or False, got {type(self.ok).__name__}")
        errors = items_of(self.errors, ArtifactIssue, "ArtifactCheck.errors")
        object.__setattr__(self, "errors", errors)
        object.__setattr__(self, "metadata", _metadata(self.metadata, "ArtifactCheck"))

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "ok": self.ok,
            "errors": [issue.to_dict() for issue in self.errors],
        }
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        return out


Parser: TypeAlias = Callable[[str], Any]
Validator: TypeAlias = Callable[[Any], Any]
Repairer: TypeAlias = Callable[[Sequence[ArtifactIssue], str], Any]


def _issues(value: Any) -> tuple[ArtifactIssue, ...]:
    if isinstance(value, ArtifactIssue):
        return (value,)
    if isinstance(value, str):
        return (ArtifactIssue(value),)
    # text_of, not str: a problem that cannot print itself must not fail the run with an error
    # that quotes what it holds.
    if isinstance(value, Sequence):
        return tuple(
            item if isinstance(item, ArtifactIssue) else ArtifactIssue(_json.text_of(item))
            for item in value
        )
    return (ArtifactIssue(_json.text_of(value)),)


def as_check(outcome: Any, value: Any) -> ArtifactCheck:
    """Reads what a validator returned: an ``ArtifactCheck``; ``True``/``None`` for valid;
    ``False`` for invalid; a message or a list of messages/``ArtifactIssue``\\ s for problems.
    Never raises: an answer that cannot be read (a sequence that fails when iterated) is an
    invalid candidate with ``metadata.reason="validator_invalid"``, its error not quoted."""
    if isinstance(outcome, ArtifactCheck):
        return outcome
    if outcome is None or outcome is True:
        return ArtifactCheck(True, value)
    if outcome is False:
        return ArtifactCheck(False, value, (ArtifactIssue("invalid artifact"),))
    try:
        issues = _issues(outcome)
    except Exception:
        return ArtifactCheck(
            False, value, (ArtifactIssue(UNREADABLE_VALIDATION),), {"reason": "validator_invalid"}
        )
    if not issues:
        return ArtifactCheck(True, value)
    return ArtifactCheck(False, value, issues)


def redacted_issues(check: ArtifactCheck, redactor: Redactor | None) -> ArtifactCheck:
    """A failed ``check`` with the secrets in its issues and metadata replaced: the issues go
    back to the model in a revision request and into events, and a validator's or parser's
    error text (which becomes an issue) may quote anything. The candidate value is kept."""
    if redactor is None or check.ok:
        return check
    return replace(
        check,
        errors=tuple(_redacted_issue(issue, redactor) for issue in check.errors),
        metadata=_redacted_metadata(check.metadata, redactor),
    )


def _redacted_issue(issue: ArtifactIssue, redactor: Redactor) -> ArtifactIssue:
    # Field by field, rebuilt here: a redactor may give back plain data for an object.
    return ArtifactIssue(
        _redacted_text(issue.message, redactor),
        _redacted_text(issue.path, redactor),
        _redacted_metadata(issue.metadata, redactor),
    )


def _redacted_text(text: str, redactor: Redactor) -> str:
    redacted = redactor.redact(text)
    return redacted if isinstance(redacted, str) else _json.text_of(redacted)


def _redacted_metadata(
    metadata: Mapping[str, JSONValue] | None, redactor: Redactor
) -> Mapping[str, JSONValue] | None:
    if metadata is None:
        return None
    redacted = redactor.redact(dict(metadata))
    return redacted if isinstance(redacted, Mapping) else {"redacted": _json.text_of(redacted)}


def failure_code(check: ArtifactCheck) -> str:
    """The code of a run that ends on ``check``: its ``metadata["reason"]`` when that is a
    non-empty string, else ``artifact_failed``. Read without calling anything of the reason's
    own, so a reason that cannot print itself cannot fail the run with what it holds."""
    metadata = check.metadata
    try:
        reason = metadata.get("reason") if metadata else None
    except Exception:  # a key whose __eq__ raises
        return ARTIFACT_FAILED
    if isinstance(reason, str):
        text = str.__str__(reason)  # a str subclass by its characters, whatever its __str__ does
        if text:
            return text
    return ARTIFACT_FAILED


def parse_failure(message: str) -> ArtifactCheck:
    return ArtifactCheck(
        False,
        errors=(ArtifactIssue(message, "$", {"reason": "parse_error"}),),
        metadata={"reason": "parse_error"},
    )


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def parse_candidate(text: str, parser: Parser | None) -> ArtifactCheck:
    """Turns a call-free answer into a candidate value, or a ``parse_error`` check."""
    if not text.strip():
        return parse_failure(NO_ARTIFACT_TEXT)
    if parser is None:
        return ArtifactCheck(True, text)
    try:
        outcome = await maybe_await(parser(text))
    except Exception as err:
        return parse_failure(_json.text_of(err) or PARSE_FAILED)
    if isinstance(outcome, ArtifactCheck):
        if outcome.ok:
            return outcome
        message = outcome.errors[0].message if outcome.errors else PARSE_FAILED
        return parse_failure(message)
    return ArtifactCheck(True, outcome)


def default_repair(issues: Sequence[ArtifactIssue], candidate: str) -> list[Message]:
    """One user message listing the problems, one per line."""
    text = "\n".join(issue.message for issue in issues) or "invalid artifact"
    return [Message("user", text)]


async def repair_messages(
    repairer: Repairer | None, issues: Sequence[ArtifactIssue], candidate: str
) -> list[Message]:
    if repairer is None:
        return default_repair(issues, candidate)
    outcome = await maybe_await(repairer(issues, candidate))
    return list(user_messages(outcome, "the repairer's answer"))


class ArtifactFailed(PrismError):
    """A generate-validate-revise run ended without a validated artifact."""

    def __init__(self, message: str, code: str, check: ArtifactCheck | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.check = check


__all__ = [
    "ARTIFACT_FAILED",
    "NO_ARTIFACT_TEXT",
    "NO_VALIDATED_ARTIFACT",
    "PARSE_FAILED",
    "TOOL_ROUND_LIMIT",
    "UNREADABLE_VALIDATION",
    "ArtifactCheck",
    "ArtifactFailed",
    "ArtifactIssue",
    "Parser",
    "Repairer",
    "Validator",
    "as_check",
    "default_repair",
    "failure_code",
    "parse_candidate",
    "redacted_issues",
    "repair_messages",
]
