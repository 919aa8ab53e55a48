"""A Gemini `generateContent` body -> a chat completions request. Pure, no I/O.

The chat flow then does everything it does for chat (profile, tool policy,
retries, checks, recovery). The model comes from the path, not the body. Tool
kinds no chat backend runs (`googleSearch`, `codeExecution`, `urlContext`, ...)
are removed and counted. `safetySettings`, `cachedContent` and `labels` are
accepted and never forwarded: a local backend has no use for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.api.gemini.contents import to_messages
from proxy.api.gemini.schema import bad, camel, to_json_schema
from proxy.errors import ApiError
from proxy.types import JSON, ChatRequest, ToolDef

_SAMPLING = (("temperature", "temperature"), ("topP", "top_p"), ("topK", "top_k"),
             ("maxOutputTokens", "max_tokens"), ("seed", "seed"),
             ("presencePenalty", "presence_penalty"),
             ("frequencyPenalty", "frequency_penalty"))
_MODES = {"AUTO": "auto", "VALIDATED": "auto", "ANY": "required", "NONE": "none",
          "MODE_UNSPECIFIED": None}
_LEVELS = {"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
THINKING_EFFORT = ((4096, "low"), (16384, "medium"))
"""`thinkingBudget` below each bound -> that reasoning effort; above them, "high"."""


@dataclass
class Translated:
    """The chat request plus what the answer needs to know of the Gemini request."""

    chat: ChatRequest
    stripped: int
    """tools of kinds no backend runs, removed."""
    thoughts: bool
    """`includeThoughts`: the model's reasoning is shown as `thought: true` parts."""


def to_chat(body: Any, model: str, *, stream: bool) -> Translated:
    """Translate a decoded body for `model` into the chat request the flow takes."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_argument")
    body = camel(body)
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise bad("contents", "must be a non-empty list of Content")
    messages = to_messages(contents)
    system = _system_text(body.get("systemInstruction"))
    if system:
        messages.insert(0, {"role": "system", "content": system})
    if not any(m["role"] != "system" for m in messages):
        raise bad("contents", "there is nothing to answer")
    chat: ChatRequest = {"model": model, "messages": messages}
    tools, stripped = split_tools(body.get("tools"))
    _add_tools(chat, tools, _config(body, "toolConfig").get("functionCallingConfig"))
    thoughts = _add_generation(chat, _config(body, "generationConfig"))
    if stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return Translated(chat, stripped, thoughts)


def _config(body: JSON, key: str) -> JSON:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad(key, "must be an object")
    return camel(value)


def _system_text(system: Any) -> str:
    """`systemInstruction`: a Content (its text parts joined) or, as the SDKs allow, a string."""
    if system is None or isinstance(system, str):
        return system or ""
    if not isinstance(system, dict) or not isinstance(system.get("parts"), list):
        raise bad("systemInstruction", "must be a Content with parts")
    texts = []
    for j, part in enumerate(system["parts"]):
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            raise bad(f"systemInstruction.parts[{j}]", "only text parts can be a system prompt")
        texts.append(part["text"])
    return "\n\n".join(t for t in texts if t)


# --- tools -------------------------------------------------------------------


def split_tools(tools: Any) -> tuple[list[ToolDef], int]:
    """Function declarations as chat tools; every other tool kind counted and dropped."""
    if tools is None:
        return [], 0
    if not isinstance(tools, list):
        raise bad("tools", "must be a list of Tools")
    kept: list[ToolDef] = []
    stripped = 0
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise bad(f"tools[{i}]", "a Tool must be an object")
        for key, value in camel(tool).items():
            if key == "functionDeclarations":
                if not isinstance(value, list):
                    raise bad(f"tools[{i}].{key}", "must be a list")
                kept.extend(_declaration(d, f"tools[{i}].{key}[{j}]")
                            for j, d in enumerate(value))
            elif value is not None:
                stripped += 1  # googleSearch, codeExecution, urlContext...: nobody runs it
    return kept, stripped


def _declaration(decl: Any, where: str) -> ToolDef:
    if not isinstance(decl, dict):
        raise bad(where, "a FunctionDeclaration must be an object")
    decl = camel(decl)
    name = decl.get("name")
    if not isinstance(name, str) or not name:
        raise bad(f"{where}.name", "a function needs a name")
    if decl.get("parametersJsonSchema") is not None:
        schema = decl["parametersJsonSchema"]
        if not isinstance(schema, dict):
            raise bad(f"{where}.parametersJsonSchema", "must be a JSON schema object")
    elif decl.get("parameters") is not None:
        schema = to_json_schema(decl["parameters"], f"{where}.parameters")
    else:
        schema = {"type": "object", "properties": {}}
    function: JSON = {"name": name, "parameters": schema}
    if isinstance(decl.get("description"), str):
        function["description"] = decl["description"]
    return {"type": "function", "function": function}


def _add_tools(chat: ChatRequest, tools: list[ToolDef], config: Any) -> None:
    """`functionCallingConfig` -> `tool_choice`; `allowedFunctionNames` keeps those tools
    only, and one name is that function. Checked even when no tool is left."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise bad("toolConfig.functionCallingConfig", "must be an object")
    config = camel(config)
    mode = config.get("mode", "MODE_UNSPECIFIED")
    if not isinstance(mode, str) or mode not in _MODES:
        raise bad("toolConfig.functionCallingConfig.mode",
                  f"must be AUTO, ANY, NONE or VALIDATED; got {mode!r}")
    choice: Any = _MODES[mode]
    allowed = config.get("allowedFunctionNames")
    if allowed is not None:
        if not isinstance(allowed, list) or not all(isinstance(n, str) for n in allowed):
            raise bad("toolConfig.functionCallingConfig.allowedFunctionNames",
                      "must be a list of function names")
        if mode in ("ANY", "VALIDATED"):
            tools = [t for t in tools if t["function"]["name"] in allowed]
            if len(tools) == 1 and mode == "ANY":
                choice = {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
    if tools:
        chat["tools"] = tools
        if choice is not None:
            chat["tool_choice"] = choice


# --- generationConfig --------------------------------------------------------


def _add_generation(chat: ChatRequest, config: JSON) -> bool:
    for theirs, ours in _SAMPLING:
        value = config.get(theirs)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad(f"generationConfig.{theirs}", "must be a number")
            chat[ours] = value
    stops = config.get("stopSequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad("generationConfig.stopSequences", "must be a list of strings")
        if stops:
            chat["stop"] = stops
    count = config.get("candidateCount")
    if count is not None and count != 1:
        raise bad("generationConfig.candidateCount", "toolshim answers with one candidate")
    response_format = _response_format(config)
    if response_format is not None:
        chat["response_format"] = response_format
    return _add_thinking(chat, config.get("thinkingConfig"))


def _response_format(config: JSON) -> JSON | None:
    if config.get("responseMimeType") != "application/json":
        return None
    if config.get("responseJsonSchema") is not None:
        schema = config["responseJsonSchema"]
        if not isinstance(schema, dict):
            raise bad("generationConfig.responseJsonSchema", "must be a JSON schema object")
    elif config.get("responseSchema") is not None:
        schema = to_json_schema(config["responseSchema"], "generationConfig.responseSchema")
    else:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}


def _add_thinking(chat: ChatRequest, thinking: Any) -> bool:
    """`thinkingConfig` -> the backend's reasoning switch (`reasoning_effort`); whether
    the answer shows the model's reasoning. A budget of -1 (dynamic) leaves it alone."""
    if thinking is None:
        return False
    if not isinstance(thinking, dict):
        raise bad("generationConfig.thinkingConfig", "must be an object")
    thinking = camel(thinking)
    level, budget = thinking.get("thinkingLevel"), thinking.get("thinkingBudget")
    if level is not None:
        if not isinstance(level, str) or level not in _LEVELS:
            raise bad("generationConfig.thinkingConfig.thinkingLevel",
                      f"must be one of {', '.join(_LEVELS)}; got {level!r}")
        chat["reasoning_effort"] = _LEVELS[level]
    elif budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < -1:
            raise bad("generationConfig.thinkingConfig.thinkingBudget",
                      "must be an integer, 0 or more (or -1)")
        if budget == 0:
            chat["reasoning_effort"] = "none"
        elif budget > 0:
            chat["reasoning_effort"] = next((e for bound, e in THINKING_EFFORT
                                             if budget < bound), "high")
    return thinking.get("includeThoughts") is True
