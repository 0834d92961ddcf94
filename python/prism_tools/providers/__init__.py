"""Providers: the scripted provider and adapters for the OpenAI and Anthropic tool formats."""

from __future__ import annotations

from prism_tools.providers.scripted import ScriptedProvider, ScriptExhaustedError

__all__ = ["ScriptExhaustedError", "ScriptedProvider"]
