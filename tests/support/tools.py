"""The tool the tests offer: get_weather(city), in each client dialect's shape.

Every shape is built from the one schema below, so a test through the chat door and the
same test through the Responses, Messages or Gemini door offer the same tool and cannot
drift apart. A test that needs another schema on purpose defines it beside itself, under
another name, saying why.
"""

from __future__ import annotations

from typing import Any

WEATHER_NAME = "get_weather"
WEATHER_DESCRIPTION = "Weather for a city"
WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# What strict clients send (Codex's Responses tools, Claude Code's Messages tools, the
# OpenAI SDK's strict mode): the same schema, closed to other keys.
WEATHER_PARAMETERS_CLOSED: dict[str, Any] = {**WEATHER_PARAMETERS, "additionalProperties": False}


def chat_tool(name: str, parameters: dict[str, Any], description: str | None = None
              ) -> dict[str, Any]:
    """A chat-completions tool: {"type": "function", "function": {...}}."""
    function: dict[str, Any] = {"name": name}
    if description is not None:
        function["description"] = description
    return {"type": "function", "function": {**function, "parameters": parameters}}


# The tools below are typed Any, as the tests' own were: the SDKs type a tool as their
# TypedDicts, and what the tests pass is the plain JSON a client sends.


# Chat completions (and Ollama's /api/chat, which takes the same shape).
WEATHER: Any = chat_tool(WEATHER_NAME, WEATHER_PARAMETERS, WEATHER_DESCRIPTION)
WEATHER_CLOSED: Any = chat_tool(WEATHER_NAME, WEATHER_PARAMETERS_CLOSED, WEATHER_DESCRIPTION)

# The Responses API's flat function tool, as Codex sends it (strict, closed schema).
WEATHER_RESPONSES: Any = {
    "type": "function", "name": WEATHER_NAME, "description": WEATHER_DESCRIPTION,
    "parameters": WEATHER_PARAMETERS_CLOSED, "strict": True}

# The Gemini API's functionDeclaration, with the JSON-schema field the SDKs send.
WEATHER_GEMINI: Any = {
    "name": WEATHER_NAME, "description": WEATHER_DESCRIPTION,
    "parametersJsonSchema": WEATHER_PARAMETERS_CLOSED}

# The Messages API's tool as Claude Code sends it: a draft-2020-12 `$schema`, a cache
# breakpoint and the streaming hints, none of which a chat backend may see.
WEATHER_MESSAGES: Any = {
    "name": WEATHER_NAME, "description": WEATHER_DESCRIPTION,
    "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                     **WEATHER_PARAMETERS_CLOSED},
    "cache_control": {"type": "ephemeral"}, "strict": True, "eager_input_streaming": True}

# A second tool, for tests where the model must pick one of several.
READ_FILE: Any = chat_tool("read_file", {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
