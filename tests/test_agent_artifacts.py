"""The generate-validate-revise loop: candidates, revisions, bounded tool rounds, failures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from tests.support import Unprintable, UnprintableError

from prism_tools import (
    AgentRunError,
    Message,
    ProviderResponse,
    ScriptedProvider,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    create_agent,
)
from prism_tools.agent import NOT_DISPATCHED
from prism_tools.artifacts import UNREADABLE_VALIDATION, ArtifactCheck, ArtifactIssue
from prism_tools.types import AgentEvent, JSONValue


def json_object(text: str) -> Any:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("artifact must be a JSON object")
    return value


def needs_title(value: Any) -> list[str]:
    return [] if "title" in value else ["missing field: title"]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, JSONValue]] = []

    async def __call__(self, args: dict[str, JSONValue], context: ToolExecutionContext) -> str:
        self.calls.append(args)
        return "looked up"


def run_agent(
    responses: list[Any], loop: dict[str, Any], **extra: Any
) -> tuple[Any, ScriptedProvider, list[AgentEvent], Recorder]:
    recorder = Recorder()
    provider = ScriptedProvider(responses)
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[ToolDefinition("lookup", execute=recorder)],
        loop=loop,
        **extra,
    )
    session = agent.session()
    events: list[AgentEvent] = []
    session.subscribe(events.append)
    return session, provider, events, recorder


def kinds(events: list[AgentEvent]) -> list[str]:
    return [event.type for event in events if event.type.startswith("artifact_")]


GVR = {"strategy": "generate-validate-revise", "parser": json_object, "validator": needs_title}


async def test_a_valid_first_candidate_is_the_artifact() -> None:
    session, provider, events, _ = run_agent([ProviderResponse(text='{"title": "ok"}')], GVR)
    result = await session.run("write it")
    assert result.status == "succeeded"
    assert result.artifact == {"title": "ok"}
    assert kinds(events) == [
        "artifact_validation_started",
        "artifact_validation_finished",
        "artifact_finished",
    ]
    assert len(provider.requests) == 1


async def test_an_invalid_candidate_is_revised_with_the_problems() -> None:
    session, provider, events, _ = run_agent(
        [ProviderResponse(text='{"body": 1}'), ProviderResponse(text='{"title": "t"}')], GVR
    )
    result = await session.run("write it")
    assert result.artifact == {"title": "t"}
    # The default repairer sends the problems back as one user message.
    second = provider.requests[1].messages
    assert second[-1] == Message("user", "missing field: title")
    assert kinds(events).count("artifact_revision_started") == 1


async def test_revisions_are_bounded_and_the_run_fails_with_the_first_problem() -> None:
    bad = [ProviderResponse(text='{"body": 1}') for _ in range(4)]
    session, provider, events, _ = run_agent(bad, {**GVR, "max_revisions": 2})
    with pytest.raises(AgentRunError) as info:
        await session.run("write it")
    assert len(provider.requests) == 3  # one candidate and two revisions
    error = info.value.result.error
    assert error is not None
    assert error.name == "ArtifactFailed"
    assert error.message == "missing field: title"
    assert error.code == "artifact_failed"
    assert kinds(events)[-1] == "artifact_failed"


async def test_unparseable_and_empty_text_are_parse_errors_that_use_a_revision() -> None:
    session, provider, events, _ = run_agent(
        [ProviderResponse(text="   "), ProviderResponse(text="not json")],
        {**GVR, "max_revisions": 1},
    )
    with pytest.raises(AgentRunError) as info:
        await session.run("write it")
    assert provider.requests[1].messages[-1].content == "no artifact text in model output"
    error = info.value.result.error
    assert error is not None
    assert error.code == "parse_error"
    finished = [event for event in events if event.type == "artifact_validation_finished"]
    assert finished[-1].data is not None
    assert finished[-1].data["result"]["errors"][0]["path"] == "$"


async def test_disabled_tool_calls_are_inert() -> None:
    session, _, _, recorder = run_agent(
        [ProviderResponse(text='{"title": "x"}', tool_calls=(ToolCall("c1", "lookup", {}),))],
        GVR,
    )
    result = await session.run("write it")
    assert recorder.calls == []
    assert result.artifact == {"title": "x"}
    assert all(message.role != "tool" for message in result.messages)
    assert all(not message.tool_calls for message in result.messages)


async def test_bounded_tool_rounds_run_without_using_a_revision() -> None:
    session, _, _, recorder = run_agent(
        [
            ProviderResponse(tool_calls=(ToolCall("c1", "lookup", {"q": 1}),)),
            ProviderResponse(tool_calls=(ToolCall("c2", "lookup", {"q": 2}),)),
            ProviderResponse(text='{"title": "done"}'),
        ],
        {**GVR, "tool_calls": "bounded", "max_revisions": 0},
    )
    result = await session.run("write it")
    assert result.artifact == {"title": "done"}
    assert [call["q"] for call in recorder.calls] == [1, 2]
    assert [message.role for message in result.messages].count("tool") == 2


async def test_bounded_tool_rounds_share_the_round_limit() -> None:
    session, _, events, recorder = run_agent(
        [
            ProviderResponse(tool_calls=(ToolCall("c1", "lookup", {}),)),
            ProviderResponse(tool_calls=(ToolCall("c2", "lookup", {}),)),
        ],
        {**GVR, "tool_calls": "bounded"},
        limits={"max_tool_rounds": 1},
    )
    with pytest.raises(AgentRunError) as info:
        await session.run("write it")
    assert len(recorder.calls) == 1  # the call past the limit did not run
    error = info.value.result.error
    assert error is not None
    assert (error.code, error.message) == ("tool_round_limit", "maximum tool rounds exceeded")
    failed = [event for event in events if event.type == "artifact_failed"]
    assert len(failed) == 1
    assert failed[0].data is not None
    assert failed[0].data["result"]["metadata"] == {"reason": "tool_round_limit"}


async def test_validator_verdicts_in_every_shape() -> None:
    verdicts: list[Any] = [
        False,
        "too short",
        [ArtifactIssue("bad field", "$.title")],
        ArtifactCheck(True, "normalised"),
    ]

    def validator(value: Any) -> Any:
        return verdicts.pop(0)

    session, provider, _, _ = run_agent(
        [ProviderResponse(text=f"draft {n}") for n in range(4)],
        {"strategy": "generate-validate-revise", "validator": validator},
    )
    result = await session.run("write it")
    assert result.artifact == "normalised"
    revisions = [request.messages[-1].content for request in provider.requests[1:]]
    assert revisions == ["invalid artifact", "too short", "bad field"]


async def test_a_parser_or_validator_error_that_cannot_be_printed_asks_for_a_revision() -> None:
    def refuse(value: Any) -> Any:
        raise UnprintableError(value)

    for options in ({**GVR, "parser": refuse}, {**GVR, "validator": refuse}):
        session, provider, _, _ = run_agent(
            [ProviderResponse(text='{"a": 1}'), ProviderResponse(text='{"a": 1}')],
            {**options, "max_revisions": 1},
        )
        with pytest.raises(AgentRunError):
            await session.run("write it")
        assert provider.requests[1].messages[-1].content == "[Unprintable UnprintableError]"


async def test_a_problem_that_cannot_print_itself_is_named_by_its_type_only() -> None:
    # str() of the problem would raise with what it holds in the message: that text must reach
    # neither the model's revision request nor the run's error.
    session, provider, _, _ = run_agent(
        [ProviderResponse(text='{"a": 1}'), ProviderResponse(text='{"a": 2}')],
        {
            "strategy": "generate-validate-revise",
            "validator": lambda candidate: [Unprintable("hunter2")],
            "max_revisions": 1,
        },
    )
    with pytest.raises(AgentRunError) as failed:
        await session.run("write it")
    assert provider.requests[1].messages[-1].content == "[Unprintable Unprintable]"
    assert "hunter2" not in str(failed.value)
    assert "hunter2" not in str(failed.value.__cause__)


def test_artifact_checks_and_issues_refuse_parts_of_the_wrong_kind() -> None:
    with pytest.raises(TypeError, match=r"ArtifactIssue\.message must be a string, got int"):
        ArtifactIssue(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ArtifactIssue\.path must be a string, got NoneType"):
        ArtifactIssue("too short", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="errors must hold ArtifactIssue objects; item 0 is a str"):
        ArtifactCheck(False, errors=["too short"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="errors must be a sequence of ArtifactIssue, got str"):
        ArtifactCheck(False, errors="too short")  # type: ignore[arg-type]
    issue = ArtifactIssue("too short")
    assert ArtifactCheck(False, errors=[issue]).errors == (issue,)  # type: ignore[arg-type]


async def test_a_custom_repairer_writes_the_revision_request() -> None:
    def repair(issues: Any, candidate: str) -> str:
        return f"fix {len(issues)} problem(s) in: {candidate}"

    session, provider, _, _ = run_agent(
        [ProviderResponse(text='{"a": 1}'), ProviderResponse(text='{"title": 1}')],
        {**GVR, "repairer": repair},
    )
    await session.run("write it")
    assert provider.requests[1].messages[-1].content == 'fix 1 problem(s) in: {"a": 1}'


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, "got NoneType"),
        ({"role": "user", "content": "fix it"}, "got dict"),
        (["fix it"], "item 0 is a str"),
    ],
)
async def test_a_repairer_answer_of_the_wrong_kind_fails_the_run_naming_it(
    answer: Any, expected: str
) -> None:
    session, provider, _, _ = run_agent(
        [ProviderResponse(text='{"a": 1}'), ProviderResponse(text='{"title": 1}')],
        {**GVR, "repairer": lambda issues, candidate: answer},
    )
    with pytest.raises(AgentRunError) as failed:
        await session.run("write it")
    cause = failed.value.__cause__
    assert isinstance(cause, TypeError)
    assert "the repairer's answer must be a string, a Message or a sequence of Messages" in str(
        cause
    )
    assert expected in str(cause)
    assert len(provider.requests) == 1  # no revision was asked for


@pytest.mark.parametrize(
    ("loop", "error"),
    [
        ({"strategy": "generate-validate-revise"}, TypeError),
        (
            {"strategy": "generate-validate-revise", "validator": needs_title, "max_revisions": -1},
            TypeError,
        ),
        (
            {"strategy": "generate-validate-revise", "validator": needs_title, "tool_calls": "all"},
            ValueError,
        ),
        ({"strategy": "plan-and-execute"}, ValueError),
    ],
)
def test_loop_options_are_checked_when_the_agent_is_built(
    loop: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        create_agent(model="m", provider=ScriptedProvider([]), tools=[], loop=loop)


async def test_a_tool_round_past_the_limit_answers_its_calls_without_running_them() -> None:
    session, provider, _, recorder = run_agent(
        [
            ProviderResponse(tool_calls=(ToolCall("c1", "lookup", {}),)),
            ProviderResponse(
                tool_calls=(ToolCall("c2", "lookup", {}), ToolCall("c3", "lookup", {}))
            ),
            ProviderResponse(text='{"title": "next"}'),
        ],
        {**GVR, "tool_calls": "bounded"},
        limits={"max_tool_rounds": 1},
    )
    with pytest.raises(AgentRunError) as info:
        await session.run("write it")
    assert len(recorder.calls) == 1
    rows = [message for message in info.value.result.messages if message.role == "tool"]
    assert [row.tool_call_id for row in rows] == ["c1", "c2", "c3"]
    assert rows[0].error is None
    assert [row.error.code for row in rows[1:] if row.error] == [NOT_DISPATCHED, NOT_DISPATCHED]
    assert info.value.result.messages == tuple(session.messages)
    # The next run sends the transcript as it is: no call is left to answer.
    await session.run("again")
    assert [message.role for message in provider.requests[2].messages][-4:] == [
        "assistant",
        "tool",
        "tool",
        "user",
    ]
    assert len(recorder.calls) == 1


def test_an_artifact_check_refuses_an_ok_that_is_not_a_bool_and_metadata_not_a_mapping() -> None:
    for ok in ("no", 1, None):
        with pytest.raises(TypeError, match=r"ArtifactCheck\.ok must be True or False, got"):
            ArtifactCheck(ok)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ArtifactCheck\.metadata must be a mapping, got list"):
        ArtifactCheck(False, metadata=["bad"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ArtifactIssue\.metadata must be a mapping, got str"):
        ArtifactIssue("too short", metadata="bad")  # type: ignore[arg-type]
    given: dict[str, JSONValue] = {"reason": "too_short"}
    check = ArtifactCheck(False, metadata=given)
    given["reason"] = "changed"
    assert check.metadata == {"reason": "too_short"}


def ok_of_the_wrong_kind(value: Any) -> ArtifactCheck:
    return ArtifactCheck("no")  # type: ignore[arg-type]


def metadata_of_the_wrong_kind(value: Any) -> ArtifactCheck:
    return ArtifactCheck(False, metadata=["bad"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("verdict", "problem"),
    [
        (ok_of_the_wrong_kind, "ArtifactCheck.ok must be True or False, got str"),
        (metadata_of_the_wrong_kind, "ArtifactCheck.metadata must be a mapping, got list"),
    ],
)
async def test_a_verdict_of_the_wrong_kind_fails_the_candidate(verdict: Any, problem: str) -> None:
    session, _, events, _ = run_agent(
        [ProviderResponse(text="candidate")],
        {"strategy": "generate-validate-revise", "validator": verdict, "max_revisions": 0},
    )
    with pytest.raises(AgentRunError) as info:
        await session.run("write it")
    result = info.value.result
    assert result.artifact is None
    assert result.error is not None
    assert (result.error.code, result.error.message) == ("validator_failed", problem)
    assert kinds(events) == [
        "artifact_validation_started",
        "artifact_validation_finished",
        "artifact_failed",
    ]


async def test_a_failure_reason_that_cannot_print_itself_gives_the_default_code() -> None:
    session, _, events, _ = run_agent(
        [ProviderResponse(text="candidate")],
        {
            "strategy": "generate-validate-revise",
            "validator": lambda value: ArtifactCheck(
                False, metadata={"reason": Unprintable("hunter2")}
            ),
            "max_revisions": 0,
        },
    )
    with pytest.raises(AgentRunError) as info:
        await session.run("write it")
    error = info.value.result.error
    assert error is not None
    assert (error.code, error.name) == ("artifact_failed", "ArtifactFailed")
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in str(info.value.__cause__)
    assert kinds(events)[-1] == "artifact_failed"


class UnreadableIssues(Sequence[str]):
    """A validator's list of problems that fails when read, quoting what it holds."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("cannot read hunter2")


async def test_a_verdict_that_cannot_be_read_fails_the_candidate_without_quoting_it() -> None:
    session, provider, _, _ = run_agent(
        [ProviderResponse(text="first"), ProviderResponse(text="second")],
        {
            "strategy": "generate-validate-revise",
            "validator": lambda value: UnreadableIssues(),
            "max_revisions": 1,
        },
    )
    with pytest.raises(AgentRunError) as info:
        await session.run("write it")
    error = info.value.result.error
    assert error is not None
    assert (error.code, error.message) == ("validator_invalid", UNREADABLE_VALIDATION)
    assert provider.requests[1].messages[-1].content == UNREADABLE_VALIDATION
    assert "hunter2" not in str(info.value)


SECRET = "sk-artifact-secret-42"


def leaks_secret(value: Any) -> Any:
    raise RuntimeError(f"checker login failed with {SECRET}")


def issues_with_secret(value: Any) -> Any:
    return ArtifactCheck(
        False,
        value,
        (ArtifactIssue(f"compare with {SECRET}", f"$.{SECRET}", {"hint": SECRET}),),
        {"reason": "mismatch", "seen": SECRET},
    )


@pytest.mark.parametrize(
    "options",
    [
        {**GVR, "parser": leaks_secret},
        {**GVR, "validator": leaks_secret},
        {**GVR, "validator": issues_with_secret},
    ],
    ids=["parser-raises", "validator-raises", "validator-issues"],
)
async def test_a_secret_in_a_checks_problems_reaches_neither_the_model_nor_the_run(
    options: dict[str, Any],
) -> None:
    from prism_tools import create_secret_redactor

    session, provider, events, _ = run_agent(
        [ProviderResponse(text='{"a": 1}'), ProviderResponse(text='{"a": 2}')],
        {**options, "max_revisions": 1},
        redactor=create_secret_redactor([SECRET]),
    )
    with pytest.raises(AgentRunError) as failed:
        await session.run("write it")

    revision = provider.requests[1].messages[-1].content
    assert isinstance(revision, str)
    assert revision  # the revision request still says what was wrong
    assert SECRET not in revision
    seen = [
        json.dumps([message.content for message in failed.value.result.messages]),
        json.dumps([event.to_dict() for event in events]),
        str(failed.value),
        repr(failed.value.__cause__),
        json.dumps(failed.value.result.error.to_dict() if failed.value.result.error else None),
    ]
    for text in seen:
        assert SECRET not in text


async def test_redacting_problems_keeps_a_valid_candidate_whole() -> None:
    from prism_tools import create_secret_redactor

    session, _, _, _ = run_agent(
        [ProviderResponse(text=json.dumps({"title": SECRET}))],
        GVR,
        redactor=create_secret_redactor([SECRET]),
    )
    result = await session.run("write it")
    assert result.artifact == {"title": SECRET}


async def test_a_redactor_that_gives_back_plain_data_for_an_issue_still_revises() -> None:
    from prism_tools import create_secret_redactor

    # At depth 1 the built-in redactor gives an issue with a secret in its metadata back as plain
    # data; the run still asks for a revision, with the issue rebuilt from it.
    session, provider, _, _ = run_agent(
        [ProviderResponse(text='{"a": 1}'), ProviderResponse(text='{"title": "ok"}')],
        {**GVR, "validator": lambda value: issues_with_secret(value) if "a" in value else None},
        redactor=create_secret_redactor([SECRET], max_depth=1),
    )
    result = await session.run("write it")
    assert result.artifact == {"title": "ok"}
    revision = provider.requests[1].messages[-1].content
    assert isinstance(revision, str)
    assert revision
    assert SECRET not in revision
