"""The agent runtime: a bounded loop of provider turns and checked tool calls.

``create_agent(...)`` holds the configuration; ``agent.session()`` keeps a transcript;
``await session.run(input)`` loops: send the transcript and the visible tools to the provider,
append its answer, dispatch its tool calls through :func:`prism_tools.dispatch_tool_call` (in
parallel where allowed, results appended in call order), and go again until the model answers
without calls or a limit stops it. See ``docs/runtime.md``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from prism_tools import _json
from prism_tools._frozen import builder
from prism_tools._options import check_option_types
from prism_tools.approval import (
    APPROVAL_REJECTED,
    MAX_PENDING_DECISIONS,
    ApprovalError,
    Decision,
    DecisionLimitError,
    PendingDecision,
    StickyRule,
    Suspension,
    call_arguments_hash,
    match_decisions,
)
from prism_tools.artifacts import (
    NO_VALIDATED_ARTIFACT,
    TOOL_ROUND_LIMIT,
    ArtifactCheck,
    ArtifactFailed,
    ArtifactIssue,
    Parser,
    Repairer,
    Validator,
    as_check,
    failure_code,
    maybe_await,
    parse_candidate,
    redacted_issues,
    repair_messages,
)
from prism_tools.checkpoints import CheckpointStore
from prism_tools.disclosure import ToolActivationState
from prism_tools.dispatch import (
    ToolValidator,
    dispatch_tool_call,
    error_info,
    ran_before_cancel,
    record_refusal,
)
from prism_tools.effects import ToolEffectStore
from prism_tools.errors import GuardrailTripwire, PrismError, RunLimitError
from prism_tools.guardrails import (
    GuardrailContext,
    GuardrailRecord,
    Guardrails,
    GuardrailStage,
    evaluate_guardrails,
    tripwire_error,
)
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.ledger import RunLedger
from prism_tools.limits import (
    CEILINGS,
    LimitsInput,
    RunLimits,
    RunLimitTracker,
    merge_limits,
    read_limits,
)
from prism_tools.messages import (
    Message,
    Provider,
    ProviderRequest,
    ProviderResponse,
    Usage,
    calls_with_unused_ids,
    message_from_dict,
    message_to_dict,
    tool_message,
    user_messages,
)
from prism_tools.middleware import DiagnosticSink, MiddlewareHook, MiddlewareRegistry
from prism_tools.policies import PermissionPolicy, TrustPolicy
from prism_tools.redaction import Redactor
from prism_tools.registry import ToolRegistry, create_tool_registry
from prism_tools.scoping import (
    Narrowing,
    RunScope,
    ToolsDisclosure,
    TurnRecord,
    TurnTools,
    read_disclosure,
    read_search_top_k,
    resolve_grant,
    tools_metadata,
)
from prism_tools.types import (
    AgentEvent,
    ErrorInfo,
    JSONValue,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    ignore_progress,
    tool_definitions,
)

logger = logging.getLogger("prism_tools.agent")

_context = builder(ToolExecutionContext)

UNKNOWN_TOOL_NAMES_SHOWN: Final = 32
"""Most tool names listed to the model after it called a tool that does not exist."""

NOT_DISPATCHED: Final = "tool_call_not_dispatched"

CLOSING_EVENTS_GRACE_MS: Final = 1000
"""How long the closing events of a run (``agent_finished`` and the events flushed with it) may
keep an async subscriber waiting once the run's wall time is used up; before that they have what
is left of it."""

RunStatus = Literal["succeeded", "failed", "suspended"]

APPROVAL_REQUIRED: Final = "approval_required"
"""``finish_reason`` of a suspended run."""
Subscriber = Callable[[AgentEvent], "Awaitable[None] | None"]
BeforeToolRound = Callable[[Sequence[ToolCall]], "Awaitable[None] | None"]


class AgentRunError(PrismError):
    """A run failed. ``result`` holds the failed ``RunResult``; ``__cause__`` the original error
    (``RunLimitError``, ``GuardrailTripwire``, a provider failure, ...)."""

    code = "ERR_PRISM_AGENT_RUN"

    def __init__(self, message: str, result: RunResult) -> None:
        super().__init__(message)
        self.result = result


class SessionBusyError(PrismError, RuntimeError):
    """A session runs one run at a time."""

    code = "ERR_PRISM_SESSION_BUSY"


class SkillError(PrismError):
    """An active skill names a tool the run does not have."""

    code = "ERR_PRISM_SKILL"


class RunCancelledError(PrismError):
    """The run's signal was set; the run stopped at the next safe point."""

    code = "ERR_PRISM_RUN_CANCELLED"


class ToolAbortedError(PrismError):
    """A tool call ended with a ``BaseException`` that is not an ``Exception`` while the run itself
    was not being cancelled: a ``CancelledError`` from a future someone else cancelled, or a
    subclass of its own, raised by the tool or by something its dispatch called (a subscriber of
    its events). The call gets an error row, the round stops as for any failing call, and the run
    fails with this as the cause (that exception as its ``__cause__``)."""

    code = "ERR_PRISM_TOOL_ABORTED"


def _stops_run(err: BaseException) -> bool:
    """Whether a ``BaseException`` out of a call ends the run as it is: the run's own cancellation
    (the task running the call is being cancelled: the wall-time limit, a caller's ``cancel``)
    or an interpreter exit. Anything else is that call's failure."""
    if isinstance(err, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
    return isinstance(err, KeyboardInterrupt | SystemExit)


@dataclass(frozen=True, slots=True)
class Skill:
    """Instructions for a kind of task, and the tools they expect. A skill never grants a tool:
    every name in ``tool_names`` must already be one of the run's tools."""

    name: str
    instructions: str = ""
    tool_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Skill.name must be a non-empty string")
        if isinstance(self.tool_names, str):
            raise TypeError("Skill.tool_names must be a collection of names, not a string")
        object.__setattr__(self, "tool_names", tuple(self.tool_names))


LOOP_STRATEGIES: Final = ("single-shot", "generate-validate-revise")


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """How a run loops.

    ``single-shot`` (default): ``tool_concurrency``, ``before_tool_round``.
    ``generate-validate-revise``: ``validator`` (required), ``parser``, ``repairer``,
    ``max_revisions`` (default 3), ``tool_calls`` (``"disabled"``, default, or ``"bounded"``).
    """

    strategy: str = "single-shot"
    tool_concurrency: int = 1
    before_tool_round: BeforeToolRound | None = None
    validator: Validator | None = None
    parser: Parser | None = None
    repairer: Repairer | None = None
    max_revisions: int = 3
    tool_calls: Literal["disabled", "bounded"] = "disabled"


def read_loop(value: LoopOptions | Mapping[str, Any] | None) -> LoopOptions:
    if value is None:
        return LoopOptions()
    if isinstance(value, LoopOptions):
        options = value
    elif isinstance(value, Mapping):
        unknown = set(value) - set(LoopOptions.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown loop options: {', '.join(sorted(map(str, unknown)))}")
        options = LoopOptions(**value)
    else:
        raise TypeError(f"loop must be a mapping or LoopOptions, got {type(value).__name__}")
    if options.strategy not in LOOP_STRATEGIES:
        raise ValueError(
            f"loop strategy {options.strategy!r} is not available; use one of {LOOP_STRATEGIES}"
        )
    if options.strategy == "generate-validate-revise":
        if not callable(options.validator):
            raise TypeError("the generate-validate-revise loop needs a validator function")
        for name in ("parser", "repairer"):
            hook = getattr(options, name)
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be callable")
        revisions = options.max_revisions
        if isinstance(revisions, bool) or not isinstance(revisions, int) or revisions < 0:
            raise TypeError("max_revisions must be an integer of at least 0")
        if options.tool_calls not in ("disabled", "bounded"):
            raise ValueError("tool_calls must be 'disabled' or 'bounded'")
        # Bounded tool rounds inside a revise loop run one call at a time.
        return replace(options, tool_concurrency=1)
    concurrency = options.tool_concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, int | float):
        raise TypeError("tool_concurrency must be a number")
    # Below 1 (or not finite) means sequential; fractions round down.
    workers = int(concurrency) if math.isfinite(concurrency) and concurrency >= 1 else 1
    if options.before_tool_round is not None and not callable(options.before_tool_round):
        raise TypeError("before_tool_round must be callable")
    return replace(options, tool_concurrency=workers)


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run produced. ``messages`` is the session transcript after the run."""

    status: RunStatus
    output_text: str
    messages: tuple[Message, ...]
    finish_reason: str | None
    usage: Usage = field(default_factory=Usage)
    turns: tuple[TurnRecord, ...] = ()
    run_id: str = ""
    limit: Mapping[str, JSONValue] | None = None
    error: ErrorInfo | None = None
    artifact: Any = None
    pending: tuple[PendingDecision, ...] = ()


def _merge_guardrails(agent: Guardrails | None, run: Guardrails | None) -> Guardrails | None:
    if run is None:
        return agent
    if agent is None:
        return run
    return Guardrails(
        input=(*agent.input, *run.input),
        output=(*agent.output, *run.output),
        tool_input=(*agent.tool_input, *run.tool_input),
        tool_output=(*agent.tool_output, *run.tool_output),
        max_concurrency=(
            run.max_concurrency if run.max_concurrency is not None else agent.max_concurrency
        ),
        packs=(*agent.packs, *run.packs),
    )


class Agent:
    """An agent's configuration. Build with :func:`create_agent`; run through sessions."""

    def __init__(
        self,
        *,
        model: str,
        provider: Provider,
        tools: ToolRegistry | Sequence[ToolDefinition],
        validator: ToolValidator | None = None,
        permission: PermissionPolicy | None = None,
        trust: TrustPolicy | None = None,
        middleware: MiddlewareRegistry | None = None,
        redactor: Redactor | None = None,
        ledger: RunLedger | None = None,
        guardrails: Guardrails | None = None,
        limits: LimitsInput = None,
        loop: LoopOptions | Mapping[str, Any] | None = None,
        skills: Iterable[Skill] = (),
        metadata: Mapping[str, JSONValue] | None = None,
        ownership: Ownership | None = None,
        identity: AgentIdentity | None = None,
        instructions: str | None = None,
        tool_narrowing: Narrowing | None = None,
        tools_disclosure: ToolsDisclosure = "all",
        tools_search: Mapping[str, Any] | None = None,
        allow_hidden_tool_calls: bool = False,
        effect_store: ToolEffectStore | None = None,
        interrupt_before_tool: bool = False,
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("model must be a non-empty string")
        if not callable(getattr(provider, "generate", None)):
            raise TypeError("provider must have an async generate(request) method")
        check_option_types(
            validator=validator,
            permission=permission,
            trust=trust,
            middleware=middleware,
            redactor=redactor,
            ledger=ledger,
            guardrails=guardrails,
            metadata=metadata,
            ownership=ownership,
            identity=identity,
            instructions=instructions,
            effect_store=effect_store,
            allow_hidden_tool_calls=allow_hidden_tool_calls,
            interrupt_before_tool=interrupt_before_tool,
        )
        if not isinstance(tools, ToolRegistry):
            tools = tool_definitions(tools)
        self.model = model
        self.provider = provider
        self.tools = tools
        self.validator = validator
        self.permission = permission
        self.trust = trust
        self.middleware = middleware
        self.redactor = redactor
        self.ledger = ledger
        self.guardrails = guardrails
        read_limits(limits)  # refuse bad limits when the agent is built, not at its first run
        self.limits = limits
        self.loop = read_loop(loop)
        self.skills = tuple(skills)
        for skill in self.skills:
            if not isinstance(skill, Skill):
                raise TypeError(f"skills must be Skill objects, got {type(skill).__name__}")
        self.metadata = dict(metadata or {})
        self.ownership = ownership
        self.identity = identity
        self.instructions = instructions
        if tool_narrowing is not None and not callable(tool_narrowing):
            raise TypeError("tool_narrowing must be callable")
        self.tool_narrowing = tool_narrowing
        self.tools_disclosure = read_disclosure(tools_disclosure)
        read_search_top_k(tools_search)
        self.tools_search = tools_search
        self.allow_hidden_tool_calls = bool(allow_hidden_tool_calls)
        self.effect_store = effect_store
        self.interrupt_before_tool = bool(interrupt_before_tool)
        _check_interrupt_loop(self.interrupt_before_tool, self.loop)
        if checkpoints is not None and not isinstance(checkpoints, CheckpointStore):
            raise TypeError("checkpoints must have save, replace, load and delete methods")
        self.checkpoints = checkpoints

    def check_run_options(
        self,
        *,
        validate: ToolValidator | None,
        effect_store: ToolEffectStore | None,
        interrupt_before_tool: bool | None,
        guardrails: Guardrails | None = None,
        loop: LoopOptions | Mapping[str, Any] | None = None,
        scoping: Mapping[str, Any] | None = None,
    ) -> None:
        """Refuses per-run options this agent does not allow (a secure agent refuses some).
        ``scoping`` holds the run's tool-scoping options that were given (not ``None``)."""

    def registered_tools(self) -> list[ToolDefinition]:
        """The agent's tools as they are registered now."""
        return self.tools.list() if isinstance(self.tools, ToolRegistry) else list(self.tools)

    def session(
        self,
        session_id: str | None = None,
        *,
        metadata: Mapping[str, JSONValue] | None = None,
        state: Mapping[str, Any] | str | None = None,
    ) -> Session:
        """A new conversation with this agent, or one restored from ``session.state`` (keeping
        its session id unless another is given)."""
        if session_id is None and state is not None:
            data = _json.loads_stored(state) if isinstance(state, str) else state
            stored = data.get("session_id") if isinstance(data, Mapping) else None
            session_id = stored if isinstance(stored, str) and stored else None
            state = data
        if isinstance(session_id, str) and _json.holds_lone_surrogate(session_id):
            # It names the session's checkpoint and effect keys: refused now, not at a suspend.
            raise ValueError("session_id holds a lone surrogate, which is not Unicode text")
        session = Session(self, session_id or f"session_{uuid.uuid4().hex}", metadata)
        if state is not None:
            session.restore(state)
        return session

    def resume_session(
        self, session_id: str, *, metadata: Mapping[str, JSONValue] | None = None
    ) -> Session:
        """The session ``checkpoints`` holds for ``session_id``, ready for ``session.resume``.
        Raises ``ApprovalError`` when the store has no state for it."""
        if self.checkpoints is None:
            raise TypeError("resume_session needs an agent built with checkpoints=")
        state = self.checkpoints.load(session_id)
        if state is None:
            raise ApprovalError(f"No checkpoint for session {session_id!r}")
        return self.session(session_id, metadata=metadata, state=state)


def create_agent(
    *,
    model: str,
    provider: Provider,
    tools: ToolRegistry | Sequence[ToolDefinition],
    validator: ToolValidator | None = None,
    permission: PermissionPolicy | None = None,
    trust: TrustPolicy | None = None,
    middleware: MiddlewareRegistry | None = None,
    redactor: Redactor | None = None,
    ledger: RunLedger | None = None,
    guardrails: Guardrails | None = None,
    limits: LimitsInput = None,
    loop: LoopOptions | Mapping[str, Any] | None = None,
    skills: Iterable[Skill] = (),
    metadata: Mapping[str, JSONValue] | None = None,
    ownership: Ownership | None = None,
    identity: AgentIdentity | None = None,
    instructions: str | None = None,
    tool_narrowing: Narrowing | None = None,
    tools_disclosure: ToolsDisclosure = "all",
    tools_search: Mapping[str, Any] | None = None,
    allow_hidden_tool_calls: bool = False,
    effect_store: ToolEffectStore | None = None,
    interrupt_before_tool: bool = False,
    checkpoints: CheckpointStore | None = None,
) -> Agent:
    """An agent: a model behind a provider, its tools, and the checks every call passes.

    ``interrupt_before_tool=True`` suspends every tool round for approval (see
    ``Session.resume``); ``checkpoints`` keeps suspended sessions (see ``Agent.resume_session``).
    """
    return Agent(
        model=model,
        provider=provider,
        tools=tools,
        validator=validator,
        permission=permission,
        trust=trust,
        middleware=middleware,
        redactor=redactor,
        ledger=ledger,
        guardrails=guardrails,
        limits=limits,
        loop=loop,
        skills=skills,
        metadata=metadata,
        ownership=ownership,
        identity=identity,
        instructions=instructions,
        tool_narrowing=tool_narrowing,
        tools_disclosure=tools_disclosure,
        tools_search=tools_search,
        allow_hidden_tool_calls=allow_hidden_tool_calls,
        effect_store=effect_store,
        interrupt_before_tool=interrupt_before_tool,
        checkpoints=checkpoints,
    )


STATE_VERSION: Final = 1


class Session:
    """One conversation: its transcript, its subscribers, and at most one active run."""

    def __init__(
        self, agent: Agent, session_id: str, metadata: Mapping[str, JSONValue] | None
    ) -> None:
        self.agent = agent
        self.id = session_id
        self.metadata = dict(metadata or {})
        self.messages: list[Message] = []
        self.activation = ToolActivationState()
        # The last run's explicit grant; a later run without ``tool_names`` resumes within it.
        self.grant: tuple[str, ...] | None = None
        # Set while a run waits for tool approvals (see ``resume``).
        self.suspension: Suspension | None = None
        # The state the agent's checkpoint store holds for this session, as this session last
        # read or wrote it: a resume replaces it only while the store still holds it.
        self._stored: Mapping[str, Any] | None = None
        self._subscribers: list[Subscriber] = []
        self._active = False

    @property
    def state(self) -> dict[str, JSONValue]:
        """The session as plain JSON-ready data: transcript, grant, activated tool names."""
        state = {
            "version": STATE_VERSION,
            "session_id": self.id,
            "messages": [message_to_dict(message) for message in self.messages],
            "grant": None if self.grant is None else list(self.grant),
            "activated": list(self.activation.names),
        }
        if self.suspension is not None:
            state["suspension"] = self.suspension.to_dict()
        # Tool values may be anything (dates, sets, bytes): store what JSON can hold of them,
        # and call arguments exactly, so their approval hashes still match after a restore.
        plain: dict[str, JSONValue] = _json.json_ready(state)
        return plain

    def restore(self, state: Mapping[str, Any] | str) -> None:
        """Loads a ``state``; a stored grant shrinks to the agent's tools as registered now."""
        data = _json.loads_stored(state) if isinstance(state, str) else state
        version = data.get("version") if isinstance(data, Mapping) else None
        if type(version) is not int or version != STATE_VERSION:
            raise ValueError(f"session state must be an object with version {STATE_VERSION}")
        messages = data.get("messages", [])
        if not isinstance(messages, list):
            raise ValueError("session state 'messages' must be a list")
        restored = [message_from_dict(item) for item in messages]
        grant = data.get("grant")
        if grant is not None:
            if not isinstance(grant, list) or not all(isinstance(name, str) for name in grant):
                raise ValueError("session state 'grant' must be a list of tool names or null")
            registered = {tool.name for tool in self.agent.registered_tools()}
            grant = tuple(name for name in grant if name in registered)
        activated = data.get("activated", [])
        if not isinstance(activated, list) or not all(
            isinstance(name, str) and name for name in activated
        ):
            raise ValueError("session state 'activated' must be a list of tool names")
        raw_suspension = data.get("suspension")
        suspension = None if raw_suspension is None else Suspension.from_dict(raw_suspension)
        # A copy: a host that later changes the mapping it passed cannot change what a resume
        # expects the checkpoint store to hold.
        try:
            stored = copy.deepcopy(dict(data))
        except RecursionError:
            stored = None  # raised below, so the error does not keep the deep traceback
        if stored is None:
            raise ValueError("session state nests too deeply to be kept")
        self.messages = restored
        self.suspension = suspension
        self.grant = grant
        self.activation = ToolActivationState(activated)
        self._stored = stored

    def clear_activated_tools(self) -> None:
        """Forgets every tool ``search_tools`` activated in this session."""
        self.activation.clear()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Calls ``subscriber(event)`` for every event of this session's runs; returns a function
        that unsubscribes. A subscriber that raises is logged and skipped."""
        if not callable(subscriber):
            raise TypeError("subscriber must be callable")
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    async def run(
        self,
        input: str | Message | Sequence[Message],
        *,
        validate: ToolValidator | None = None,
        limits: LimitsInput = None,
        loop: LoopOptions | Mapping[str, Any] | None = None,
        guardrails: Guardrails | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        signal: asyncio.Event | None = None,
        tool_names: Iterable[str] | None = None,
        tool_narrowing: Narrowing | None = None,
        tools_disclosure: ToolsDisclosure | None = None,
        tools_search: Mapping[str, Any] | None = None,
        allow_hidden_tool_calls: bool | None = None,
        effect_store: ToolEffectStore | None = None,
        interrupt_before_tool: bool | None = None,
    ) -> RunResult:
        """Runs the loop until the model answers without tool calls or a limit stops it.

        Raises ``AgentRunError`` (with ``.result`` and the original error as ``__cause__``) when
        the run fails; the transcript keeps what happened up to the failure. With
        ``interrupt_before_tool`` (here or on the agent) a tool round suspends the run instead:
        ``status="suspended"``, ``pending`` set, nothing run; continue with :meth:`resume`.
        """
        if isinstance(tool_names, str):
            raise TypeError("tool_names must be a collection of tool names, not a single string")
        check_option_types(
            validate=validate,
            guardrails=guardrails,
            metadata=metadata,
            signal=signal,
            effect_store=effect_store,
            allow_hidden_tool_calls=allow_hidden_tool_calls,
            interrupt_before_tool=interrupt_before_tool,
        )
        self.agent.check_run_options(
            validate=validate,
            effect_store=effect_store,
            interrupt_before_tool=interrupt_before_tool,
            guardrails=guardrails,
            loop=loop,
            scoping=_given(
                tool_narrowing=tool_narrowing,
                tools_disclosure=tools_disclosure,
                tools_search=tools_search,
                allow_hidden_tool_calls=allow_hidden_tool_calls,
            ),
        )
        if self._active:
            raise SessionBusyError("Agent session already has an active run")
        if self.suspension is not None:
            raise ApprovalError(
                "Session has pending tool approvals; answer them with session.resume() first"
            )
        self._active = True
        try:
            run = _Run(
                self,
                user_messages(input),
                validate=validate,
                limits=merge_limits(self.agent.limits, limits),
                loop=read_loop(loop) if loop is not None else self.agent.loop,
                guardrails=_merge_guardrails(self.agent.guardrails, guardrails),
                metadata=metadata,
                signal=signal,
                effect_store=effect_store,
                scope=_ScopeOptions(
                    tool_names=None if tool_names is None else tuple(tool_names),
                    narrowing=tool_narrowing,
                    disclosure=tools_disclosure,
                    search=tools_search,
                    allow_hidden=allow_hidden_tool_calls,
                ),
                interrupt=(
                    self.agent.interrupt_before_tool
                    if interrupt_before_tool is None
                    else bool(interrupt_before_tool)
                ),
            )
            return await run.execute()
        finally:
            self._active = False

    @property
    def pending(self) -> tuple[PendingDecision, ...]:
        """The tool calls waiting for approval (empty unless a run is suspended)."""
        return () if self.suspension is None else self.suspension.outstanding

    async def resume(
        self,
        decisions: Mapping[str, Decision | str | Mapping[str, Any]],
        *,
        validate: ToolValidator | None = None,
        limits: LimitsInput = None,
        loop: LoopOptions | Mapping[str, Any] | None = None,
        guardrails: Guardrails | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        signal: asyncio.Event | None = None,
        tool_narrowing: Narrowing | None = None,
        tools_disclosure: ToolsDisclosure | None = None,
        tools_search: Mapping[str, Any] | None = None,
        allow_hidden_tool_calls: bool | None = None,
        effect_store: ToolEffectStore | None = None,
    ) -> RunResult:
        """Answers a suspended run's pending calls and continues it.

        ``decisions`` maps pending approval ids (or tool call ids) to a :class:`Decision`
        (or just its action). While some pending calls still have no decision the run stays
        suspended: the decisions are kept and a ``suspended`` result lists the calls left;
        nothing runs. Once every call has one, approved calls go through the whole dispatch
        path again (scope, guardrails, permission, validation, effects); rejected ones get an
        ``approval_rejected`` row and never run. Then the run goes on with the next provider
        turn, and may suspend again. Unknown or repeated decisions raise ``ApprovalError``
        before anything runs. The run keeps its id, grant (shrunk to the
        tools registered now), counters and limits (``limits`` can only narrow them); objects
        that JSON cannot hold (``validate``, ``guardrails``, ``loop``, ``effect_store``, the
        scoping hooks) are the agent's unless given again here.
        """
        suspension = self.suspension
        if suspension is None:
            raise ApprovalError("Session has no pending tool approvals to resume")
        check_option_types(
            validate=validate,
            guardrails=guardrails,
            metadata=metadata,
            signal=signal,
            effect_store=effect_store,
            allow_hidden_tool_calls=allow_hidden_tool_calls,
        )
        self.agent.check_run_options(
            validate=validate,
            effect_store=effect_store,
            interrupt_before_tool=None,
            guardrails=guardrails,
            loop=loop,
            scoping=_given(
                tool_narrowing=tool_narrowing,
                tools_disclosure=tools_disclosure,
                tools_search=tools_search,
                allow_hidden_tool_calls=allow_hidden_tool_calls,
            ),
        )
        # Read before the approvals are used up, as limits and loop are: a misspelled option
        # must not cost the run its decisions.
        if tools_disclosure is not None:
            read_disclosure(tools_disclosure)
        if tools_search is not None:
            read_search_top_k(tools_search)
        if self._active:
            raise SessionBusyError("Agent session already has an active run")
        chosen = {**suspension.decided, **match_decisions(suspension.outstanding, decisions)}
        calls = self._suspended_calls(suspension)
        if len(chosen) < len(suspension.pending):
            return self._still_suspended(replace(suspension, decided=chosen))
        run_loop = read_loop(loop) if loop is not None else self.agent.loop
        if run_loop.strategy != "single-shot":
            raise TypeError("resume continues single-shot runs only")
        self._active = True
        try:
            run = _Run(
                self,
                (),
                validate=validate,
                limits=merge_limits(RunLimits(**suspension.limits), limits),
                loop=run_loop,
                guardrails=_merge_guardrails(self.agent.guardrails, guardrails),
                metadata={**suspension.metadata, **(metadata or {})},
                signal=signal,
                effect_store=effect_store,
                scope=_ScopeOptions.resumed(
                    suspension.scope,
                    narrowing=tool_narrowing,
                    disclosure=tools_disclosure,
                    search=tools_search,
                    allow_hidden=allow_hidden_tool_calls,
                ),
                interrupt=True,
                resume=_Resume(suspension, calls, chosen),
            )
            # The approvals are consumed from here on: a crash during the round leaves the
            # calls unanswered in the stored state, never ready to run a second time.
            self._set_suspension(None)
            return await run.execute()
        finally:
            self._active = False

    def _still_suspended(self, suspension: Suspension) -> RunResult:
        """Keeps a partial batch of decisions and reports the calls still waiting."""
        self._set_suspension(suspension)
        return RunResult(
            status="suspended",
            output_text="",
            messages=tuple(self.messages),
            finish_reason=APPROVAL_REQUIRED,
            run_id=suspension.run_id,
            pending=suspension.outstanding,
        )

    def _set_suspension(self, suspension: Suspension | None) -> None:
        """Moves a suspended session on: new decisions kept, or its approvals consumed. With a
        checkpoint store this first replaces the state this session read, as one atomic step;
        when another resume changed it in between, ``ApprovalError``, and nothing changes."""
        store = self.agent.checkpoints
        if store is None:
            self.suspension = suspension
            return
        previous, self.suspension = self.suspension, suspension
        try:
            state = self.state
            # Only True counts: a store's truthy stranger (a cursor, a row count) is not a yes.
            replaced = (
                self._stored is not None and store.replace(self.id, self._stored, state) is True
            )
        except BaseException:
            self.suspension = previous
            raise
        if not replaced:
            self.suspension = previous
            raise ApprovalError(
                f"The checkpoint of session {self.id!r} changed after this session read it: "
                "another resume answered or used its approvals. Nothing ran; load it again "
                "with resume_session."
            )
        self._stored = state

    def _checkpoint_suspension(self) -> None:
        """Saves a session whose run just suspended, as the state later resumes replace."""
        store = self.agent.checkpoints
        if store is not None:
            state = self.state
            store.save(self.id, state)
            self._stored = state

    def _suspended_calls(self, suspension: Suspension) -> tuple[ToolCall, ...]:
        """The suspended round's calls, from the transcript, in call order."""
        # The round is the last message that asked for calls; ids are read there only, as a
        # host's history may repeat an id of an earlier turn (the loop renames only new calls).
        position = _last_call_message(self.messages, 0)
        found = {} if position is None else {c.id: c for c in self.messages[position].tool_calls}
        answered = (
            set()
            if position is None
            else {message.tool_call_id for message in self.messages[position + 1 :]}
        )
        pending = {item.tool_call_id: item for item in suspension.pending}
        calls: list[ToolCall] = []
        for call_id in suspension.call_ids:
            stored = found.get(call_id)
            if stored is None or call_id in answered:
                raise ApprovalError(
                    f"Suspended tool call {call_id!r} is not pending in the transcript"
                )
            # The state may have been stored anywhere: a decision holds only for the call it was
            # asked for, and a call without one only runs under the rule that covered it.
            item = pending.get(call_id)
            if item is None:
                if stored.name not in suspension.sticky:
                    raise ApprovalError(
                        f"Suspended tool call {call_id!r} has neither a pending decision nor "
                        "a rule for its tool"
                    )
            elif item.tool_name != stored.name or item.arguments_hash != call_arguments_hash(
                stored.arguments
            ):
                raise ApprovalError(
                    f"Suspended tool call {call_id!r} no longer matches its pending decision "
                    "(its tool or arguments changed)"
                )
            calls.append(stored)
        return tuple(calls)

    async def _emit(self, event: AgentEvent, until: float | None = None) -> None:
        """Hands ``event`` to every subscriber; one that raises is logged and skipped. With
        ``until`` (event-loop time; for the events sent outside the run's wall-time timeout) an
        async subscriber still waiting then is cancelled, logged and skipped."""
        for subscriber in tuple(self._subscribers):
            try:
                outcome = subscriber(event)
                if not inspect.isawaitable(outcome):
                    continue
                if until is None:
                    await outcome
                    continue
                bound = asyncio.timeout_at(until)
                try:
                    async with bound:
                        await outcome
                except TimeoutError:
                    if not bound.expired():
                        raise
                    logger.warning(
                        "event subscriber on %s cut off: the run's wall time is used up",
                        event.type,
                    )
            except Exception:  # a subscriber never breaks the run
                logger.exception("event subscriber failed on %s", event.type)
            except asyncio.CancelledError as err:
                if _stops_run(err):
                    raise  # the run itself is being cancelled
                # A cancellation of the subscriber's own making is its failure, nothing more.
                logger.exception("event subscriber failed on %s", event.type)


def _last_call_message(messages: Sequence[Message], start: int) -> int | None:
    """The position of the message whose calls the rows at the end of ``messages`` answer: the
    last message before them, when it asked for calls and lies at ``start`` or later."""
    position = len(messages)
    while position > start and messages[position - 1].role == "tool":
        position -= 1
    if position == start or not messages[position - 1].tool_calls:
        return None
    return position - 1


def _given(**options: Any) -> dict[str, Any]:
    """The options that were given, by name."""
    return {name: value for name, value in options.items() if value is not None}


def _check_interrupt_loop(interrupt: bool, loop: LoopOptions) -> None:
    """Approval suspends single-shot tool rounds; the generate-validate-revise loop's bounded
    tool calls cannot wait for it (a ``TypeError``, at ``create_agent`` when both are the
    agent's, else when the run starts)."""
    if interrupt and loop.strategy != "single-shot" and loop.tool_calls == "bounded":
        raise TypeError(
            "interrupt_before_tool works with the single-shot loop and with "
            "generate-validate-revise without tool calls"
        )


@dataclass(frozen=True, slots=True)
class _ScopeOptions:
    """A run's own scoping options (None: the agent's)."""

    tool_names: tuple[str, ...] | None = None
    narrowing: Narrowing | None = None
    disclosure: ToolsDisclosure | None = None
    search: Mapping[str, Any] | None = None
    allow_hidden: bool | None = None

    @classmethod
    def resumed(
        cls,
        kept: Mapping[str, Any],
        *,
        narrowing: Narrowing | None,
        disclosure: ToolsDisclosure | None,
        search: Mapping[str, Any] | None,
        allow_hidden: bool | None,
    ) -> _ScopeOptions:
        """A resume's options: each one it passes, else the suspended run's own (``kept``)."""
        return cls(
            narrowing=narrowing,
            disclosure=disclosure if disclosure is not None else kept.get("tools_disclosure"),
            search=search if search is not None else kept.get("tools_search"),
            allow_hidden=(
                allow_hidden if allow_hidden is not None else kept.get("allow_hidden_tool_calls")
            ),
        )

    def stored(self) -> dict[str, JSONValue]:
        """The options a suspension keeps (the JSON ones given; the grant is kept apart)."""
        kept: dict[str, JSONValue] = {}
        if self.disclosure is not None:
            kept["tools_disclosure"] = self.disclosure
        if self.search is not None:
            kept["tools_search"] = {"top_k": read_search_top_k(self.search)}
        if self.allow_hidden is not None:
            kept["allow_hidden_tool_calls"] = bool(self.allow_hidden)
        return kept


@dataclass(frozen=True, slots=True)
class _Resume:
    """A suspended run being continued: its record, its round's calls, the decisions by call."""

    suspension: Suspension
    calls: tuple[ToolCall, ...]
    decisions: Mapping[str, Decision]


class _Run:
    """The state of one run; discarded when it ends."""

    def __init__(
        self,
        session: Session,
        input_messages: tuple[Message, ...],
        *,
        validate: ToolValidator | None,
        limits: RunLimits,
        loop: LoopOptions,
        guardrails: Guardrails | None,
        metadata: Mapping[str, JSONValue] | None,
        signal: asyncio.Event | None,
        scope: _ScopeOptions,
        effect_store: ToolEffectStore | None = None,
        interrupt: bool = False,
        resume: _Resume | None = None,
    ) -> None:
        agent = session.agent
        _check_interrupt_loop(interrupt, loop)
        self.interrupt = interrupt
        self.resume = resume
        self.sticky: dict[str, StickyRule] = (
            dict(resume.suspension.sticky) if resume is not None else {}
        )
        self.pending: tuple[PendingDecision, ...] = ()
        self.effect_store = effect_store if effect_store is not None else agent.effect_store
        self.session = session
        self.agent = agent
        self.input = input_messages
        self.validate = validate if validate is not None else agent.validator
        self.loop = loop
        self.guardrails = guardrails
        self.signal = signal
        self.id = resume.suspension.run_id if resume is not None else f"run_{uuid.uuid4().hex}"
        # JSON metadata given to this run, kept for a resume in another process.
        self.run_metadata: dict[str, JSONValue] = dict(metadata or {})
        self.metadata: dict[str, JSONValue] = {**agent.metadata, **session.metadata}
        if metadata:
            self.metadata.update(metadata)
        # The run's own snapshot: tools registered or replaced during the run change nothing.
        registered = agent.registered_tools()
        self.registry = create_tool_registry(registered, duplicate="replace")
        if scope.narrowing is not None and not callable(scope.narrowing):
            raise TypeError("tool_narrowing must be callable")
        self.scope_options = scope
        self.registered = registered
        # Whether a round must look for exclusive tools at all (most runs have none).
        self.exclusive_tools = any(tool.exclusive for tool in registered)
        # Event-loop time at which the wall-time limit ends the run (set when it starts).
        self.deadline = math.inf
        self.turn_tools: TurnTools | None = None
        self.turn_records: list[TurnRecord] = []
        self.pending_events: list[AgentEvent] = []
        self.tracker = RunLimitTracker(limits, on_breach=self._on_breach)
        self.usage = Usage()
        self.turns = 0
        self.call_ids: set[str] | None = None  # see used_call_ids
        self.artifact: Any = None
        # Where this run's messages start in the session transcript.
        self.first_message = len(session.messages)

    # -- events ---------------------------------------------------------------------------------

    def _event(self, kind: str, **data: JSONValue) -> AgentEvent:
        redactor = self.agent.redactor
        payload = redactor.redact(data) if redactor is not None and data else data
        return AgentEvent(kind, session_id=self.session.id, run_id=self.id, data=payload or None)

    async def emit(self, kind: str, **data: JSONValue) -> None:
        if self.session._subscribers:  # nobody listening: build nothing
            await self.session._emit(self._event(kind, **data))

    async def forward(self, event: AgentEvent) -> None:
        await self.session._emit(event)

    def _on_breach(self, breach: RunLimitError) -> None:
        self.pending_events.append(self._event("run_limit_exceeded", breach=dict(breach.breach)))

    async def flush_events(self, until: float | None = None) -> None:
        """Emits the queued ``run_limit_exceeded`` events (``until``: see ``closing_deadline``)."""
        events, self.pending_events = self.pending_events, []
        for event in events:
            await self.session._emit(event, until)

    def closing_deadline(self) -> float:
        """Until when the closing events may wait on async subscribers: the rest of the wall
        time, and at least ``CLOSING_EVENTS_GRACE_MS`` (a run failing on its wall time has none
        left). They are emitted outside the run's timeout, so it cannot bound them itself."""
        now = asyncio.get_running_loop().time()
        return max(self.deadline, now + CLOSING_EVENTS_GRACE_MS / 1000)

    async def emit_closing(self, kind: str, until: float, **data: JSONValue) -> None:
        if self.session._subscribers:
            await self.session._emit(self._event(kind, **data), until)

    # -- the run ----------------------------------------------------------------------------------

    async def execute(self) -> RunResult:
        finish_reason: str | None = None
        self.deadline = (
            asyncio.get_running_loop().time() + self.tracker.limits.max_wall_time_ms / 1000
        )
        deadline = asyncio.timeout_at(self.deadline)
        try:
            async with deadline:
                # Inside the timeout: a subscriber that never returns cannot hold the run.
                await self.emit("agent_started", model=self.agent.model)
                self.scope = self.build_scope()
                self.check_skills()
                if self.resume is not None:
                    rounds = await self.resume_round()
                    # A round past a narrowed max_tool_rounds stops the run as it would have.
                    finish_reason = (
                        "turn_limit" if rounds is None else await self.single_shot(rounds)
                    )
                else:
                    if self.scope_options.tool_names is not None:
                        self.session.grant = self.scope.grant_names
                    await self.guard("input", list(self.input))
                    self.answer_unanswered_calls()
                    self.session.messages.extend(self.input)
                    if self.loop.strategy == "generate-validate-revise":
                        finish_reason = await self.generate_validate_revise()
                    else:
                        finish_reason = await self.single_shot()
        except TimeoutError as err:
            self.forget_checkpoint()
            if not deadline.expired():
                # A TimeoutError from the provider or a hook is an ordinary failure.
                return await self.failed(err)
            if self.tracker.breach is None:
                try:
                    self.tracker.fail(
                        "max_wall_time_ms",
                        self.tracker.limits.max_wall_time_ms,
                        round(self.tracker.elapsed_ms()),
                    )
                except RunLimitError as breach:
                    return await self.failed(breach)
            return await self.failed(err)
        except Exception as err:
            self.forget_checkpoint()
            return await self.failed(err)
        except BaseException:
            # Cancelled or interrupted: the resumed run has ended all the same, and the state
            # the store holds (approvals used, the round unanswered) must not be loaded again.
            self.forget_checkpoint()
            raise
        if self.pending:
            # Outside the run's timeout, as the other closing events are: a slow subscriber of
            # run_suspended cannot turn a suspended run into a failed one.
            return await self.suspended()
        self.forget_checkpoint()
        until = self.closing_deadline()
        await self.flush_events(until)
        result = RunResult(
            status="succeeded",
            output_text=self.output_text(),
            messages=tuple(self.session.messages),
            finish_reason=finish_reason,
            usage=self.usage,
            turns=tuple(self.turn_records),
            run_id=self.id,
            artifact=self.artifact,
        )
        await self.emit_closing(
            "agent_finished", until, status="succeeded", finish_reason=finish_reason
        )
        return result

    def forget_checkpoint(self) -> None:
        """Removes the checkpoint of a resumed run that has ended. What it holds has no
        approvals left (the resume used them up), so a store that fails to remove it is logged,
        not raised: the run's own outcome stands."""
        store = self.agent.checkpoints
        if self.resume is None or store is None:
            return
        try:
            store.delete(self.session.id)
        except Exception as err:
            # The error's type only: a store's message may quote what it holds.
            logger.warning(
                "could not remove the checkpoint of session %r after its resumed run: %s",
                self.session.id,
                type(err).__name__,
            )

    async def suspended(self) -> RunResult:
        """Ends the run waiting for approvals: the session holds them (and the checkpoint store,
        when the agent has one). A store that fails to save them fails the run instead: nothing
        waits, and the round's calls are answered as not run."""
        try:
            self.session._checkpoint_suspension()
        except Exception as err:
            self.session.suspension = None
            self.pending = ()
            self.forget_checkpoint()
            return await self.failed(err)
        until = self.closing_deadline()
        await self.flush_events(until)
        await self.emit_closing(
            "run_suspended", until, pending=[item.to_dict() for item in self.pending]
        )
        result = RunResult(
            status="suspended",
            output_text=self.output_text(),
            messages=tuple(self.session.messages),
            finish_reason=APPROVAL_REQUIRED,
            usage=self.usage,
            turns=tuple(self.turn_records),
            run_id=self.id,
            pending=self.pending,
        )
        await self.emit_closing(
            "agent_finished", until, status="suspended", finish_reason=APPROVAL_REQUIRED
        )
        return result

    async def failed(self, err: BaseException) -> RunResult:
        self.answer_stopped_calls()
        until = self.closing_deadline()
        await self.flush_events(until)
        breach = self.tracker.breach
        cause = breach if breach is not None and isinstance(err, TimeoutError) else err
        info = error_info(cause, self.agent.redactor)
        result = RunResult(
            status="failed",
            output_text=self.output_text(),
            messages=tuple(self.session.messages),
            finish_reason="error",
            usage=self.usage,
            turns=tuple(self.turn_records),
            run_id=self.id,
            limit=dict(breach.breach) if breach is not None else None,
            error=info,
        )
        await self.emit_closing(
            "agent_finished", until, status="failed", finish_reason="error", error=info.to_dict()
        )
        raise AgentRunError(f"Agent run failed: {info.message}", result) from cause

    def output_text(self) -> str:
        for message in reversed(self.session.messages[self.first_message :]):
            if message.role == "assistant":
                return message.content if isinstance(message.content, str) else ""
        return ""

    def build_scope(self) -> RunScope:
        options = self.scope_options
        agent = self.agent
        if self.resume is not None:
            # The suspended run's grant, shrunk to what is registered now; never wider.
            stored = self.resume.suspension
            grant = resolve_grant(self.registered, stored.grant, strict=False)
            everything = stored.granted_everything and len(grant) == len(self.registered)
        elif options.tool_names is not None:
            grant = resolve_grant(self.registered, options.tool_names, strict=True)
            everything = False
        elif self.session.grant is not None:
            # Resuming: the stored grant, shrunk to what is registered now; never wider.
            grant = resolve_grant(self.registered, self.session.grant, strict=False)
            everything = False
        else:
            grant = tuple(self.registered)
            everything = True
        disclosure = (
            read_disclosure(options.disclosure)
            if options.disclosure is not None
            else agent.tools_disclosure
        )
        search = options.search if options.search is not None else agent.tools_search
        allow_hidden = (
            options.allow_hidden
            if options.allow_hidden is not None
            else agent.allow_hidden_tool_calls
        )
        return RunScope(
            self.registered,
            grant,
            granted_everything=everything,
            narrowing=options.narrowing if options.narrowing is not None else agent.tool_narrowing,
            disclosure=disclosure,
            top_k=read_search_top_k(search),
            allow_hidden=bool(allow_hidden),
            activation=self.session.activation,
        )

    def answer_unanswered_calls(self) -> None:
        """Gives every tool call an earlier run left without a result (a ``turn_limit`` stop)
        an error row, so the transcript stays one providers accept."""
        self._answer_last_calls(0, "Tool call was not run: the previous run stopped at its limit")

    def answer_stopped_calls(self) -> None:
        """Answers the calls of the run's last assistant message that have no row yet (the run
        failed between the answer and its round: the wall time, ``DecisionLimitError``, the
        artifact loop's tool-round limit) with ``tool_call_not_dispatched`` rows: none of them
        ran, and the transcript stays one providers accept. Calls waiting for approval keep
        waiting."""
        if self.session.suspension is None:
            self._answer_last_calls(
                0 if self.resume is not None else self.first_message,
                "Tool call was not run because the run failed before its tool round",
            )

    def _answer_last_calls(self, start: int, text: str) -> None:
        """A ``tool_call_not_dispatched`` row for each call of the last message that asked for
        calls (at ``start`` or later) without a row after it."""
        messages = self.session.messages
        position = _last_call_message(messages, start)
        if position is None:
            return
        answered = {message.tool_call_id for message in messages[position + 1 :]}
        for call in messages[position].tool_calls:
            if call.id not in answered:
                messages.append(
                    tool_message(call, None, ErrorInfo(message=text, code=NOT_DISPATCHED))
                )
                answered.add(call.id)

    def turn_query(self) -> str:
        """The text a turn's search uses: the latest user or assistant text."""
        for message in reversed(self.session.messages):
            if message.role != "tool" and isinstance(message.content, str) and message.content:
                return message.content
        return ""

    def check_skills(self) -> None:
        names = set(self.scope.grant_names)
        for skill in self.agent.skills:
            for tool in skill.tool_names:
                if tool not in names:
                    raise SkillError(f"Skill {skill.name} requires inactive tool: {tool}")

    def instructions(self) -> str | None:
        parts = [self.agent.instructions] if self.agent.instructions else []
        parts.extend(skill.instructions for skill in self.agent.skills if skill.instructions)
        return "\n\n".join(parts) if parts else None

    async def guard(self, stage: GuardrailStage, value: Any) -> None:
        if self.guardrails is None:
            return
        guards = self.guardrails.for_stage(stage)
        if not guards:
            return
        redactor = self.agent.redactor
        records, terminal = await evaluate_guardrails(
            stage,
            guards,
            GuardrailContext(
                stage=stage,
                value=value,
                session_id=self.session.id,
                run_id=self.id,
                metadata=self.metadata,
                signal=self.signal,
            ),
            max_concurrency=self.guardrails.concurrency,
            scrub=redactor.redact if redactor is not None else (lambda item: item),
        )
        for record in records:
            await self.forward(
                AgentEvent(
                    "guardrail_decision",
                    session_id=self.session.id,
                    run_id=self.id,
                    record=record,
                )
            )
        if terminal is not None:
            raise self.stage_error(terminal)

    @staticmethod
    def stage_error(record: GuardrailRecord) -> GuardrailTripwire:
        # At the run-level stages every non-allow decision stops the run.
        return tripwire_error(record)

    def check_signal(self) -> None:
        if self.signal is not None and self.signal.is_set():
            raise RunCancelledError("Run cancelled")

    async def provider_turn(self, *, keep_calls: bool = True) -> ProviderResponse:
        """One turn: request, answer, output guardrails, the assistant message, the events."""
        self.check_signal()
        self.tracker.charge("max_turns")
        self.turns += 1
        turn = self.turns
        await self.emit("turn_started", turn=turn)
        turn_tools = await self.select_turn_tools(turn)
        if turn_tools.clamped:
            await self.emit("tool_narrowing_clamped", turn=turn, dropped=list(turn_tools.clamped))
        plan = turn_tools.disclosure
        if plan is not None and plan.fallback is not None:
            await self.emit(
                "tools_disclosure_fallback", turn=turn, reason=plan.fallback, detail=plan.detail
            )
        tools = turn_tools.sent
        names = [tool.name for tool in tools]
        tools_meta = tools_metadata(names)
        request = ProviderRequest(
            model=self.agent.model,
            messages=tuple(self.session.messages),
            tools=tools,
            metadata=self.metadata or None,
            instructions=self.instructions(),
        )
        # Recorded before the call, so a failed provider turn still shows what was sent.
        self.turn_records.append(TurnRecord(turn, tools_meta))
        await self.emit("provider_turn_started", turn=turn, metadata={"tools": tools_meta})
        response = await self.agent.provider.generate(request)
        if not isinstance(response, ProviderResponse):
            raise TypeError(
                f"provider.generate must return a ProviderResponse, got {type(response).__name__}"
            )
        if response.tool_calls:
            calls = calls_with_unused_ids(response.tool_calls, self.used_call_ids())
            if calls is not response.tool_calls:
                response = replace(response, tool_calls=calls)
        self.usage = self.usage + response.usage
        self.turn_records[-1] = TurnRecord(
            turn, tools_meta, len(response.tool_calls), response.finish_reason, response.usage
        )
        await self.emit(
            "provider_turn_finished",
            turn=turn,
            finish_reason=response.finish_reason,
            tool_calls=len(response.tool_calls),
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
        )
        await self.guard("output", response)
        calls = response.tool_calls if keep_calls else ()
        if response.text or calls:
            self.session.messages.append(Message("assistant", response.text, tool_calls=calls))
            await self.emit("message_finished", turn=turn, role="assistant")
        await self.emit("turn_finished", turn=turn)
        self.tracker.check_wall_time()
        return response

    def used_call_ids(self) -> set[str]:
        """The ids the session's calls have, read from the transcript once per run."""
        if self.call_ids is None:
            self.call_ids = {
                call.id for message in self.session.messages for call in message.tool_calls
            }
        return self.call_ids

    async def select_turn_tools(self, turn: int) -> TurnTools:
        """The tools a turn sends and accepts (a resumed round selects them again)."""
        turn_tools = await self.scope.for_turn(turn, self.session.messages, self.turn_query())
        plan = turn_tools.disclosure
        if plan is not None and plan.fallback is None:
            # The generated search_tools joins this run's snapshot so dispatch can find it.
            self.registry.register(turn_tools.sent[-1])
        self.turn_tools = turn_tools
        return turn_tools

    async def single_shot(self, rounds: int = 0) -> str | None:
        while True:
            response = await self.provider_turn()
            calls = response.tool_calls
            if not calls:
                return response.finish_reason or "stop"
            if rounds >= self.tracker.limits.max_tool_rounds:
                return "turn_limit"
            rounds += 1
            if not self.interrupt:
                await self.dispatch_round(calls)
            else:
                answered = self.sticky_answers(calls)
                gated = [
                    call
                    for call in calls
                    if call.id not in answered and call.name not in self.sticky
                ]
                if gated:
                    self.suspend(calls, gated, rounds)
                    return APPROVAL_REQUIRED
                await self.dispatch_round(calls, answered)
            await self.flush_events()

    # -- approval ---------------------------------------------------------------------------------

    def sticky_answers(self, calls: Sequence[ToolCall]) -> dict[str, ErrorInfo]:
        """Rows for the calls a ``reject_for_run`` decision covers."""
        answered: dict[str, ErrorInfo] = {}
        for call in calls:
            rule = self.sticky.get(call.name)
            if rule is not None and rule.action == "reject_for_run":
                message = rule.reason or "Rejected for this run"
                answered[call.id] = ErrorInfo(message=message, code=APPROVAL_REJECTED)
        return answered

    def suspend(self, calls: Sequence[ToolCall], gated: Sequence[ToolCall], rounds: int) -> None:
        """Records the round as waiting: nothing of it has run."""
        if len(gated) > MAX_PENDING_DECISIONS:
            raise DecisionLimitError(
                f"Pending decisions exceed {MAX_PENDING_DECISIONS} per run ({len(gated)} calls)"
            )
        self.pending = tuple(
            PendingDecision(
                f"approval_{uuid.uuid4().hex}",
                call.id,
                call.name,
                call_arguments_hash(call.arguments),
            )
            for call in gated
        )
        self.session.suspension = Suspension(
            run_id=self.id,
            call_ids=tuple(call.id for call in calls),
            pending=self.pending,
            grant=self.scope.grant_names,
            granted_everything=self.scope.granted_everything,
            rounds=rounds,
            turns=self.turns,
            limits=read_limits(self.tracker.limits),
            counts={name: self.tracker.count(name) for name in CEILINGS},
            sticky=dict(self.sticky),
            metadata=self.run_metadata,
            scope=self.scope_options.stored(),
        )

    async def resume_round(self) -> int | None:
        """Answers the suspended round as decided, dispatching the approved calls; returns the
        run's tool-round count. None, with nothing run, when ``limits`` given to the resume
        narrowed ``max_tool_rounds`` below the round: its calls stay unanswered, as those of a
        round a run stops before (the session's next run answers them)."""
        assert self.resume is not None
        stored = self.resume.suspension
        for name, count in stored.counts.items():
            for _ in range(count):
                self.tracker.charge(name)
        self.turns = stored.turns
        await self.emit(
            "run_resumed",
            decisions={
                item.approval_id: self.resume.decisions[item.tool_call_id].action
                for item in stored.pending
            },
        )
        if stored.rounds > self.tracker.limits.max_tool_rounds:
            return None
        calls: list[ToolCall] = []
        answered = self.sticky_answers(self.resume.calls)
        later: dict[str, StickyRule] = {}
        for call in self.resume.calls:
            decision = self.resume.decisions.get(call.id)
            if decision is None:
                calls.append(call)  # a sticky rule covered it when the run suspended
                continue
            if decision.approves:
                if decision.arguments is not None:
                    call = ToolCall(call.id, call.name, decision.arguments)
                answered.pop(call.id, None)
            else:
                answered[call.id] = ErrorInfo(
                    message=decision.rejection_message(), code=APPROVAL_REJECTED
                )
            # Two calls of one tool may get opposite rules: the rejection stands for later
            # calls, whichever came first (an allow never overrides a given reject).
            if decision.action == "reject_for_run" or (
                decision.action == "allow_for_run" and call.name not in later
            ):
                later[call.name] = StickyRule(decision.action, decision.reason)
            calls.append(call)
        # Sticky decisions cover later rounds; this round's calls each had their own.
        self.sticky.update(later)
        await self.select_turn_tools(self.turns)
        await self.dispatch_round(calls, answered)
        await self.flush_events()
        return stored.rounds

    async def generate_validate_revise(self) -> str | None:
        """Candidates until one validates, revising at most ``max_revisions`` times; bounded
        tool rounds in between share ``max_tool_rounds`` and use no revision."""
        options = self.loop
        bounded = options.tool_calls == "bounded"
        rounds = 0
        attempts = 0
        while True:
            response = await self.provider_turn(keep_calls=bounded)
            if bounded and response.tool_calls:
                if rounds >= self.tracker.limits.max_tool_rounds:
                    check = ArtifactCheck(
                        False,
                        errors=(ArtifactIssue(TOOL_ROUND_LIMIT),),
                        metadata={"reason": "tool_round_limit"},
                    )
                    await self.emit(
                        "artifact_failed",
                        turn=self.turns,
                        attempt=attempts + 1,
                        result=check.to_dict(),
                    )
                    raise ArtifactFailed(TOOL_ROUND_LIMIT, "tool_round_limit", check)
                rounds += 1
                await self.dispatch_round(response.tool_calls)
                await self.flush_events()
                continue
            attempts += 1
            await self.emit("artifact_validation_started", turn=self.turns, attempt=attempts)
            check = await parse_candidate(response.text, options.parser)
            if check.ok:
                assert options.validator is not None  # read_loop guarantees it
                try:
                    outcome = await maybe_await(options.validator(check.value))
                except Exception as err:
                    outcome = ArtifactCheck(
                        False,
                        check.value,
                        (ArtifactIssue(_json.text_of(err) or "validator failed"),),
                        {"reason": "validator_failed"},
                    )
                check = as_check(outcome, check.value)
            check = redacted_issues(check, self.agent.redactor)
            await self.emit(
                "artifact_validation_finished",
                turn=self.turns,
                attempt=attempts,
                result=check.to_dict(),
            )
            if check.ok:
                self.artifact = check.value
                await self.emit("artifact_finished", turn=self.turns, attempt=attempts)
                return response.finish_reason or "stop"
            if attempts > options.max_revisions:
                await self.emit(
                    "artifact_failed", turn=self.turns, attempt=attempts, result=check.to_dict()
                )
                message = check.errors[0].message if check.errors else NO_VALIDATED_ARTIFACT
                raise ArtifactFailed(message, failure_code(check), check)
            await self.emit("artifact_revision_started", turn=self.turns, attempt=attempts)
            self.session.messages.extend(
                await repair_messages(options.repairer, check.errors, response.text)
            )

    # -- tool rounds ------------------------------------------------------------------------------

    def dispatch_arguments(self) -> tuple[Any, ...]:
        """``dispatch_tool_call``'s options after the context, in order, for this round (passed
        positionally: a call then costs no keyword matching)."""
        agent = self.agent
        return (
            self.turn_tools.dispatch_filter if self.turn_tools is not None else None,
            agent.middleware,
            self.validate,
            None,  # before_execute
            self.forward if self.session._subscribers else None,
            (),  # secrets: the agent's redactor covers them
            agent.redactor,
            agent.ledger,
            agent.ownership,
            agent.identity,
            self.guardrails,
            agent.trust,
            agent.permission,
            self.effect_store,
            self.tracker,
        )

    def call_context(self, call_id: str) -> ToolExecutionContext:
        """The context a call of this run is checked and run with."""
        return _context(
            self.session.id,
            self.id,
            call_id,
            self.signal,
            self.metadata,
            ignore_progress,
            self.agent.identity,
            None,  # idempotency_key: dispatch derives it for tools with a durable effect
        )

    async def dispatch_one(self, call: ToolCall, options: tuple[Any, ...]) -> ToolResult:
        return await dispatch_tool_call(call, self.registry, self.call_context(call.id), *options)

    async def audit_answered(
        self, calls: Sequence[ToolCall], answered: Mapping[str, ErrorInfo]
    ) -> None:
        """The event and ledger row of each call answered without dispatch (a rejection), in
        call order, as dispatch writes them for the calls it blocks."""
        agent = self.agent
        emit = self.forward if self.session._subscribers else None
        if emit is None and agent.ledger is None:
            return
        for call in calls:
            error = answered.get(call.id)
            if error is not None:
                await record_refusal(
                    call,
                    self.call_context(call.id),
                    "execution_denied",
                    error,
                    emit=emit,
                    redactor=agent.redactor,
                    ledger=agent.ledger,
                    ownership=agent.ownership,
                )

    async def dispatch_round(
        self, calls: Sequence[ToolCall], answered: Mapping[str, ErrorInfo] | None = None
    ) -> None:
        """Dispatches ``calls`` (except those ``answered`` already has an error row for) and
        appends one row per call, in call order, once every call of the round has ended."""
        answered = answered or {}
        if answered:
            redactor = self.agent.redactor
            if redactor is not None:
                # A reason may quote a secret: the transcript, which the model reads, gets it
                # redacted, as the event and the ledger row do.
                answered = {call_id: redactor.redact(error) for call_id, error in answered.items()}
            try:
                await self.audit_answered(calls, answered)
            except BaseException:
                # Cancelled or failed while auditing: the round still gets its rows (the
                # answered calls theirs, the others not dispatched) before it ends.
                self.append_rows(calls, [None] * len(calls), {}, answered)
                raise
            runnable = [call for call in calls if call.id not in answered]
            if not runnable:
                self.append_rows(calls, [None] * len(calls), {}, answered)
                return
        options = self.dispatch_arguments()
        workers = max(1, min(self.loop.tool_concurrency, len(calls)))
        gate: _ExclusiveRound | None = None
        if workers > 1 and self.exclusive_tools:
            if any(
                (tool := self.registry.get(call.name)) is not None and tool.exclusive
                for call in calls
            ):
                workers = 1
            else:
                middleware = self.agent.middleware
                if middleware is not None and middleware.has("tool_call"):
                    # A middleware may rename a call to an exclusive tool: gate the round.
                    gate = _ExclusiveRound(middleware, self.registry)
                    options = (options[0], gate, *options[2:])
        results: list[ToolResult | None] = [None] * len(calls)
        failures: dict[int, BaseException] = {}
        failure_order: list[int] = []
        # What ends the run as it is, raised once the rows are written: the run's cancellation
        # (the round's own first), an interpreter exit.
        interrupts: list[BaseException] = []
        claimed = 0

        def stopped() -> bool:
            return (
                bool(failures)
                or bool(interrupts)
                or (self.signal is not None and self.signal.is_set())
            )

        def ends_run(err: BaseException) -> bool:
            """Whether a call's ``BaseException`` ends the run (see ``_stops_run``). A parallel
            worker is a task of its own: its cancellation is the run's only when ``_settle``
            cancelled the round, which it records first in ``interrupts``."""
            if workers == 1 or not isinstance(err, asyncio.CancelledError):
                return _stops_run(err)
            return any(isinstance(item, asyncio.CancelledError) for item in interrupts)

        async def worker() -> None:
            nonlocal claimed
            while not stopped() and claimed < len(calls):
                index = claimed
                claimed += 1
                if calls[index].id in answered:
                    continue
                try:
                    results[index] = await self.dispatch_one(calls[index], options)
                except Exception as err:  # settled; re-raised after the rows are written
                    failures[index] = err
                    failure_order.append(index)
                except BaseException as err:
                    failures[index] = err
                    # Cancelled after the tool ran and its end was recorded: its row carries
                    # what it returned, not "cancelled" (the model must not redo a done call).
                    results[index] = ran_before_cancel(err)
                    if ends_run(err):
                        interrupts.append(err)
                    else:  # a tool's own CancelledError or BaseException: that call failed
                        failure_order.append(index)
                finally:
                    if gate is not None:
                        gate.leave()

        try:
            hook = self.loop.before_tool_round
            if hook is not None:
                outcome = hook([call for call in calls if call.id not in answered])
                if inspect.isawaitable(outcome):
                    await outcome
            if workers == 1:
                await worker()
            else:
                loop = asyncio.get_running_loop()
                await _settle([loop.create_task(worker()) for _ in range(workers)], interrupts)
        finally:
            # Whatever stopped the round (a failure, the signal, the wall-time limit), every
            # worker has ended here, and every call gets exactly one row, in call order.
            self.append_rows(calls, results, failures, answered)
        if interrupts:
            raise interrupts[0]
        if failure_order:
            index = failure_order[0]
            failure = failures[index]
            if isinstance(failure, Exception):
                raise failure
            raise ToolAbortedError(
                f"Tool call {calls[index].id} stopped with {type(failure).__name__} "
                "while the run was not being cancelled"
            ) from failure
        self.check_signal()

    def append_rows(
        self,
        calls: Sequence[ToolCall],
        results: Sequence[ToolResult | None],
        failures: Mapping[int, BaseException],
        answered: Mapping[str, ErrorInfo] | None = None,
    ) -> None:
        for index, call in enumerate(calls):
            result = results[index]
            failure = failures.get(index)
            if answered and call.id in answered:
                row = tool_message(call, None, answered[call.id])
            elif result is not None:
                row = self.tool_row(call, result)
            elif isinstance(failure, asyncio.CancelledError):
                row = tool_message(
                    call, None, ErrorInfo(message="Tool call cancelled", code="cancelled")
                )
            elif failure is not None:
                row = tool_message(call, None, error_info(failure, self.agent.redactor))
            else:
                info = ErrorInfo(
                    message="Tool call was not run because the tool round stopped early",
                    code=NOT_DISPATCHED,
                )
                row = tool_message(call, None, info)
            self.session.messages.append(row)

    def tool_row(self, call: ToolCall, result: ToolResult) -> Message:
        error = result.error
        blocked = (result.metadata or {}).get("blocked_reason")
        if error is not None and blocked == "unknown_tool":
            names = list(self.turn_tools.callable_names) if self.turn_tools is not None else []
            shown = names[:UNKNOWN_TOOL_NAMES_SHOWN]
            more = len(names) - len(shown)
            listing = ", ".join(shown) + (f" (and {more} more)" if more > 0 else "")
            error = ErrorInfo(
                message=f"{error.message}. Tools you can call: {listing or 'none'}",
                code=error.code,
                name=error.name,
                details={"available_tools": list(shown)},
            )
        value = result.value if result.content is None else result.content
        return tool_message(call, value, error)


async def _settle(tasks: Sequence[asyncio.Task[None]], interrupts: list[BaseException]) -> None:
    """Waits until every worker task of a round has ended. A cancellation of the round (the
    wall-time limit, a caller's ``cancel``) is put first in ``interrupts``, cancels the workers
    once (a call cut off gets a ``cancelled`` row; one that is cleaning up finishes its clean-up)
    and the wait goes on: nothing of the round runs on after the run has returned."""
    cancelled = False
    # Checked before each wait: a cancel scope that cancels at every step (anyio) would
    # otherwise cancel each wait before it could see that the workers are done.
    while not all(task.done() for task in tasks):
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError as err:
            if not cancelled:
                cancelled = True
                interrupts.insert(0, err)
                for task in tasks:
                    task.cancel()


class _ExclusiveRound(MiddlewareRegistry):
    """The agent's middleware for a parallel round in which a ``tool_call`` middleware may turn a
    call into one of an exclusive tool (the round was planned on the names the model sent). Once
    the chain has produced the call that will run, a call of an exclusive tool waits until no
    other call of the round is past this point, and the others wait until it has ended
    (``leave``, from the worker). Rounds that need no such gate never build one."""

    __slots__ = ("alone", "changed", "held", "inner", "registry", "running", "waiting")

    def __init__(self, inner: MiddlewareRegistry, registry: ToolRegistry) -> None:
        super().__init__(error_policy=inner.error_policy)
        self.inner = inner
        self.registry = registry
        self.running = 0  # calls of other tools past the gate
        self.waiting = 0  # calls of exclusive tools waiting at the gate
        self.alone = False  # a call of an exclusive tool is past the gate
        self.changed = asyncio.Event()
        self.held: dict[asyncio.Task[Any] | None, bool] = {}

    def has(self, hook: MiddlewareHook) -> bool:
        return self.inner.has(hook)

    def __len__(self) -> int:
        return len(self.inner)

    async def run(
        self, hook: MiddlewareHook, value: Any, *, report: DiagnosticSink | None = None
    ) -> Any:
        value = await self.inner.run(hook, value, report=report)
        if hook == "tool_call":
            tool = self.registry.get(value.name)
            await self.enter(tool is not None and tool.exclusive)
        return value

    async def enter(self, exclusive: bool) -> None:
        if exclusive:
            self.waiting += 1
            try:
                while self.alone or self.running:
                    await self.changed.wait()
            except BaseException:
                self.waiting -= 1
                self.notify()
                raise
            self.waiting -= 1
            self.alone = True
        else:
            # Calls of exclusive tools go first, so a stream of other calls cannot starve them.
            while self.alone or self.waiting:
                await self.changed.wait()
            self.running += 1
        self.held[asyncio.current_task()] = exclusive

    def leave(self) -> None:
        """Ends what the current worker's call holds, if it got past the gate."""
        exclusive = self.held.pop(asyncio.current_task(), None)
        if exclusive is None:
            return
        if exclusive:
            self.alone = False
        else:
            self.running -= 1
        self.notify()

    def notify(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


__all__ = [
    "APPROVAL_REQUIRED",
    "CLOSING_EVENTS_GRACE_MS",
    "NOT_DISPATCHED",
    "UNKNOWN_TOOL_NAMES_SHOWN",
    "Agent",
    "AgentRunError",
    "LoopOptions",
    "RunCancelledError",
    "RunResult",
    "Session",
    "SessionBusyError",
    "Skill",
    "SkillError",
    "ToolAbortedError",
    "create_agent",
]
