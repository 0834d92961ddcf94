"""Providers: the scripted provider and adapters for the OpenAI and Anthropic tool formats.

The adapters map data only; the SDK clients (``openai``, ``anthropic`` extras) are imported by
the caller, who passes a client object to ``OpenAIChatProvider`` or ``AnthropicMessagesProvider``.
"""

from __future__ import annotations

from prism_tools.providers.anthropic import (
    AnthropicMessagesProvider,
    AnthropicStreamMapper,
    anthropic_messages,
    anthropic_stream_deltas,
    anthropic_tools,
    parse_anthropic_response,
)
from prism_tools.providers.openai import (
    OpenAIChatProvider,
    openai_messages,
    openai_stream_deltas,
    openai_tools,
    parse_openai_response,
)
from prism_tools.providers.payloads import ToolPayloadError
from prism_tools.providers.scripted import ScriptedProvider, ScriptExhaustedError
from prism_tools.providers.streaming import (
    ProviderStreamError,
    ToolCallAssembler,
    assemble_response,
    assemble_stream,
)

__all__ = [
    "AnthropicMessagesProvider",
    "AnthropicStreamMapper",
    "OpenAIChatProvider",
    "ProviderStreamError",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ToolCallAssembler",
    "ToolPayloadError",
    "anthropic_messages",
    "anthropic_stream_deltas",
    "anthropic_tools",
    "assemble_response",
    "assemble_stream",
    "openai_messages",
    "openai_stream_deltas",
    "openai_tools",
    "parse_anthropic_response",
    "parse_openai_response",
]
