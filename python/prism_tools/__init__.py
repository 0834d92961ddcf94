"""prism-tools: a tool harness for LLM agents, with a Rust core.

The host hands the harness the tools an agent may use; the harness keeps them in a registry,
narrows them with exact filters, checks every model tool call, runs the calls that pass, emits
lifecycle events and writes an audit ledger with secrets redacted.
"""

from __future__ import annotations

try:
    from prism_tools import _core
except ImportError as err:  # pragma: no cover - depends on the installed wheel
    raise ImportError(
        "prism_tools could not load its compiled core (prism_tools._core). Install a wheel built "
        "for this interpreter, or build from source with a Rust toolchain: pip install ."
    ) from err

from prism_tools._core import ToolFilter
from prism_tools.agent import (
    APPROVAL_REQUIRED,
    Agent,
    AgentRunError,
    LoopOptions,
    RunCancelledError,
    RunResult,
    Session,
    SessionBusyError,
    Skill,
    SkillError,
    ToolAbortedError,
    create_agent,
)
from prism_tools.approval import (
    APPROVAL_REJECTED,
    ApprovalError,
    Decision,
    DecisionLimitError,
    PendingDecision,
)
from prism_tools.artifacts import ArtifactCheck, ArtifactFailed, ArtifactIssue
from prism_tools.catalog_check import CatalogCheck, CatalogFinding, check_catalog
from prism_tools.checkpoints import (
    CheckpointStore,
    InMemoryCheckpointStore,
    SqliteCheckpointStore,
)
from prism_tools.disclosure import (
    ToolActivationState,
    ToolDisclosure,
    create_search_tools_tool,
    disclose_tools,
    plan_tool_disclosure,
)
from prism_tools.dispatch import ARGUMENTS_NOT_OBJECT, dispatch_tool_call, error_info
from prism_tools.effect_stores import SqliteToolEffectStore
from prism_tools.effect_stores_postgres import PostgresToolEffectStore
from prism_tools.effects import (
    InMemoryToolEffectStore,
    ToolEffect,
    ToolEffectError,
    ToolEffectStore,
)
from prism_tools.errors import (
    ArgumentsError,
    DuplicateToolError,
    GuardrailTripwire,
    IdentityError,
    LedgerWriteError,
    MiddlewareError,
    PermissionDeniedError,
    PrismError,
    RunLimitError,
    SchemaGuardError,
    ToolScopeError,
    ToolSearchCapacityError,
    TrustDeniedError,
    UnknownToolError,
)
from prism_tools.formats import (
    CATALOG_FORMATS,
    CatalogFormat,
    CatalogFormatError,
    CatalogLoad,
    CatalogProblem,
    StrictSchemaError,
    bind,
    bind_catalog,
    detect_format,
    export_catalog,
    load_catalog,
    load_catalog_report,
    strict_schema,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai_chat,
    to_openai_responses,
    to_plain_catalog,
)
from prism_tools.function_tools import (
    ArgumentConversionError,
    original_function,
    tool,
    tool_from_function,
)
from prism_tools.guardrails import (
    FunctionGuardrail,
    Guardrail,
    GuardrailContext,
    GuardrailDecision,
    GuardrailRecord,
    GuardrailRulePack,
    Guardrails,
    guardrail,
)
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.ledger import InMemoryRunLedger, RunLedger
from prism_tools.ledger_postgres import PostgresRunLedger
from prism_tools.ledger_sqlite import SqliteRunLedger
from prism_tools.limits import RunLimits
from prism_tools.messages import (
    Message,
    Provider,
    ProviderDelta,
    ProviderRequest,
    ProviderResponse,
    Usage,
)
from prism_tools.middleware import MiddlewareRegistry, create_middleware_registry
from prism_tools.policies import (
    PermissionDecision,
    PermissionPolicy,
    PermissionRequest,
    TrustDecision,
    TrustPolicy,
    TrustRequest,
    create_static_permission_policy,
    create_static_trust_policy,
)
from prism_tools.providers import ProviderStreamError, ScriptedProvider, ToolPayloadError
from prism_tools.redaction import (
    Redactor,
    SecretRedactor,
    create_secret_redactor,
    redact_run_ledger_record,
)
from prism_tools.registry import (
    ContributionRegistries,
    ToolRegistry,
    compile_filter,
    create_contribution_registries,
    create_tool_registry,
    filter_tools,
)
from prism_tools.search import SearchHit, ToolSearchIndex
from prism_tools.secure import SecureAgent, create_secure_agent
from prism_tools.types import (
    BLOCKED_REASONS,
    AgentEvent,
    ErrorInfo,
    JSONValue,
    ToolCall,
    ToolCallRecord,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)
from prism_tools.validation import (
    ArgumentIssue,
    JsonSchemaAdapter,
    ToolArgumentValidator,
    ToolParameterValidator,
    check_schema,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
    create_tool_parameter_validator,
    parse_tool_arguments,
)

__version__: str = _core.__version__

__all__ = [
    "APPROVAL_REJECTED",
    "APPROVAL_REQUIRED",
    "ARGUMENTS_NOT_OBJECT",
    "BLOCKED_REASONS",
    "CATALOG_FORMATS",
    "Agent",
    "AgentEvent",
    "AgentIdentity",
    "AgentRunError",
    "ApprovalError",
    "ArgumentConversionError",
    "ArgumentIssue",
    "ArgumentsError",
    "ArtifactCheck",
    "ArtifactFailed",
    "ArtifactIssue",
    "CatalogCheck",
    "CatalogFinding",
    "CatalogFormat",
    "CatalogFormatError",
    "CatalogLoad",
    "CatalogProblem",
    "CheckpointStore",
    "ContributionRegistries",
    "Decision",
    "DecisionLimitError",
    "DuplicateToolError",
    "ErrorInfo",
    "FunctionGuardrail",
    "Guardrail",
    "GuardrailContext",
    "GuardrailDecision",
    "GuardrailRecord",
    "GuardrailRulePack",
    "GuardrailTripwire",
    "Guardrails",
    "IdentityError",
    "InMemoryCheckpointStore",
    "InMemoryRunLedger",
    "InMemoryToolEffectStore",
    "JSONValue",
    "JsonSchemaAdapter",
    "LedgerWriteError",
    "LoopOptions",
    "Message",
    "MiddlewareError",
    "MiddlewareRegistry",
    "Ownership",
    "PendingDecision",
    "PermissionDecision",
    "PermissionDeniedError",
    "PermissionPolicy",
    "PermissionRequest",
    "PostgresRunLedger",
    "PostgresToolEffectStore",
    "PrismError",
    "Provider",
    "ProviderDelta",
    "ProviderRequest",
    "ProviderResponse",
    "ProviderStreamError",
    "Redactor",
    "RunCancelledError",
    "RunLedger",
    "RunLimitError",
    "RunLimits",
    "RunResult",
    "SchemaGuardError",
    "ScriptedProvider",
    "SearchHit",
    "SecretRedactor",
    "SecureAgent",
    "Session",
    "SessionBusyError",
    "Skill",
    "SkillError",
    "SqliteCheckpointStore",
    "SqliteRunLedger",
    "SqliteToolEffectStore",
    "StrictSchemaError",
    "ToolAbortedError",
    "ToolActivationState",
    "ToolArgumentValidator",
    "ToolCall",
    "ToolCallRecord",
    "ToolDefinition",
    "ToolDisclosure",
    "ToolEffect",
    "ToolEffectError",
    "ToolEffectStore",
    "ToolExecutionContext",
    "ToolFilter",
    "ToolParameterValidator",
    "ToolPayloadError",
    "ToolRegistry",
    "ToolResult",
    "ToolScopeError",
    "ToolSearchCapacityError",
    "ToolSearchIndex",
    "TrustDecision",
    "TrustDeniedError",
    "TrustPolicy",
    "TrustRequest",
    "UnknownToolError",
    "Usage",
    "__version__",
    "bind",
    "bind_catalog",
    "check_catalog",
    "check_schema",
    "compile_filter",
    "create_agent",
    "create_contribution_registries",
    "create_json_schema_adapter",
    "create_json_schema_tool_argument_validator",
    "create_middleware_registry",
    "create_search_tools_tool",
    "create_secret_redactor",
    "create_secure_agent",
    "create_static_permission_policy",
    "create_static_trust_policy",
    "create_tool_parameter_validator",
    "create_tool_registry",
    "detect_format",
    "disclose_tools",
    "dispatch_tool_call",
    "error_info",
    "export_catalog",
    "filter_tools",
    "guardrail",
    "load_catalog",
    "load_catalog_report",
    "original_function",
    "parse_tool_arguments",
    "plan_tool_disclosure",
    "redact_run_ledger_record",
    "strict_schema",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai_chat",
    "to_openai_responses",
    "to_plain_catalog",
    "tool",
    "tool_from_function",
]
