"""An Anthropic Messages request body -> a chat completions request. Pure, no I/O.

The chat flow then does everything it does for chat (profile, tool policy,
retries, checks, recovery). The fields toolshim relies on are validated, and a
malformed body is a 400 naming the field that never reaches the backend.
Hosted tools (`web_search_20250305`, `bash_20250124`, `text_editor_*`, ...) that
no chat backend runs are removed and counted, as the Responses API's are.
`cache_control`, `metadata`, `output_config`, `context_management` and the beta
tool fields are accepted and never forwarded: a local backend has no use for
them and some reject unknown fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

import orjson
from pydantic import (
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    TypeAdapter,
    ValidationError,
    with_config,
)
from typing_extensions import TypedDict  # pydantic needs this one below Python 3.12

from proxy.errors import ApiError
from proxy.types import JSON, ChatRequest, Message, ToolDef

# Blocks that record what a hosted tool did: the chat backend never ran it, so the
# conversation goes on without them (as Ollama's and LiteLLM's converters do).
_HOSTED_BLOCKS = {"server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
                  "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result"}
# The model's own earlier reasoning: accepted, never sent back as text.
_THINKING_BLOCKS = {"thinking", "redacted_thinking"}

_CHOICES = {"auto": "auto", "any": "required"}

THINKING_EFFORT = ((4096, "low"), (16384, "medium"))
"""`budget_tokens` below each bound -> that reasoning effort; above them, "high"."""


@with_config(ConfigDict(extra="allow"))
class _Body(TypedDict):
    model: Annotated[str, Field(min_length=1)]
    # Required, as in the API: a client that omits it gets the API's own 400.
    max_tokens: Annotated[StrictInt, Field(ge=1)]
    messages: list[dict[str, Any]]
    system: NotRequired[str | list[dict[str, Any]] | None]
    # "false" (a string) must not start a stream: booleans are strict, as for chat.
    stream: NotRequired[StrictBool | None]
    tools: NotRequired[list[dict[str, Any]] | None]
    tool_choice: NotRequired[dict[str, Any] | None]
    stop_sequences: NotRequired[list[str] | None]
    temperature: NotRequired[Annotated[float | None, Field(ge=0, le=2)]]
    top_p: NotRequired[Annotated[float | None, Field(ge=0, le=1)]]
    top_k: NotRequired[Annotated[StrictInt | None, Field(ge=0)]]
    thinking: NotRequired[dict[str, Any] | None]
    metadata: NotRequired[dict[str, Any] | None]


_BODY = TypeAdapter(_Body)


@dataclass
class Translated:
    """The chat request plus what the answer needs to know of the Messages request."""

    chat: ChatRequest
    stripped: int
    """hosted tools removed."""
    thinking: bool
    """the request enabled thinking: the model's reasoning is shown as thinking blocks."""
    stop_sequences: tuple[str, ...] = ()


def bad(where: str, message: str) -> ApiError:
    return ApiError(400, f"{where}: {message}", param=where, code="invalid_request")


def validate(body: Any) -> JSON:
    """The decoded body, checked; a 400 naming the first bad field otherwise."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    try:
        _BODY.validate_python(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        # The checked fields are all top-level; deeper loc parts name union members.
        raise bad(str(err["loc"][0]) if err["loc"] else "body", err["msg"]) from None
    return body


def to_chat(body: JSON) -> Translated:
    """Translate a validated body into the chat request the flow takes."""
    messages: list[Message] = []
    system = [system_text(body.get("system"))]
    for i, message in enumerate(body["messages"]):
        if isinstance(message, dict) and message.get("role") == "system":
            # Claude Code sends system turns mid-conversation; many chat templates refuse
            # a system message that is not first, so their text joins the system prompt.
            system.append(_system_turn(message, f"messages.{i}"))
            continue
        messages.extend(_message(message, f"messages.{i}"))
    if not messages:
        raise bad("messages", "there is nothing to answer")
    joined = "\n\n".join(text for text in system if text)
    if joined:
        messages.insert(0, {"role": "system", "content": joined})
    chat: ChatRequest = {"model": body["model"], "messages": messages,
                         "max_tokens": body["max_tokens"]}
    tools, stripped = split_tools(body.get("tools") or [])
    choice, parallel = tool_choice(body.get("tool_choice"),
                                   {t["function"]["name"] for t in tools})
    if tools:
        chat["tools"] = tools
        if choice is not None:
            chat["tool_choice"] = choice
        if parallel is not None:
            chat["parallel_tool_calls"] = parallel
    stops = tuple(body.get("stop_sequences") or ())
    if stops:
        chat["stop"] = list(stops)
    for key in ("temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            chat[key] = body[key]
    thinking = _add_thinking(chat, body.get("thinking"))
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return Translated(chat, stripped, thinking, stops)


def system_text(system: Any) -> str:
    """`system` as one string: text blocks joined by blank lines (Claude Code sends its
    attribution line and its prompt as separate blocks)."""
    if system is None or isinstance(system, str):
        return system or ""
    texts = []
    for i, block in enumerate(system):
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise bad(f"system.{i}", "system blocks must be text blocks")
        texts.append(block["text"])
    return "\n\n".join(t for t in texts if t)


# --- messages ----------------------------------------------------------------


def _system_turn(message: JSON, where: str) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return system_text(content) if content else ""
    raise bad(f"{where}.content", "must be a string or a list of text blocks")


def _message(message: JSON, where: str) -> list[Message]:
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise bad(f"{where}.role", f"must be user, assistant or system, got {role!r}")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise bad(f"{where}.content", "must be a string or a list of content blocks")
    if role == "assistant":
        return [_assistant(content, where)]
    return _user(content, where)


def _assistant(blocks: list[Any], where: str) -> Message:
    texts: list[str] = []
    calls: list[JSON] = []
    for j, block in enumerate(blocks):
        kind = _kind(block, f"{where}.content.{j}")
        if kind == "text":
            texts.append(_text(block, f"{where}.content.{j}"))
        elif kind == "tool_use":
            calls.append(_call(block, f"{where}.content.{j}"))
        elif kind not in _THINKING_BLOCKS and kind not in _HOSTED_BLOCKS:
            raise bad(f"{where}.content.{j}.type",
                      f"an assistant message cannot hold a {kind!r} block")
    out: Message = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""
    return out


def _user(blocks: list[Any], where: str) -> list[Message]:
    """Tool results become `tool` messages first (chat wants them right after the call);
    the rest of the turn (text, images) follows as one user message."""
    results: list[Message] = []
    parts: list[JSON] = []
    for j, block in enumerate(blocks):
        here = f"{where}.content.{j}"
        kind = _kind(block, here)
        if kind == "tool_result":
            results.append(_tool_result(block, here, parts))
        elif kind in ("text", "image", "document"):
            parts.append(_part(block, here))
        elif kind not in _THINKING_BLOCKS and kind not in _HOSTED_BLOCKS:
            raise bad(f"{here}.type", f"unsupported content block type {kind!r}")
    if not parts:
        return results if results else [{"role": "user", "content": ""}]
    if all(p["type"] == "text" for p in parts):
        return [*results, {"role": "user", "content": "".join(p["text"] for p in parts)}]
    return [*results, {"role": "user", "content": parts}]


def _kind(block: Any, where: str) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(kind, str):
        raise bad(f"{where}.type", "every content block needs a type")
    return kind


def _text(block: JSON, where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise bad(f"{where}.text", "must be a string")
    return text


def _part(block: JSON, where: str) -> JSON:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": _text(block, where)}
    source = block.get("source")
    if not isinstance(source, dict):
        raise bad(f"{where}.source", f"a {kind} block needs a source object")
    if kind == "document":
        # A plain-text document is text any model reads; a PDF (or a file id) needs a
        # backend that takes documents, which no chat backend does: say so.
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return {"type": "text", "text": source["data"]}
        raise bad(f"{where}", "document blocks other than plain text are not supported by "
                  "this backend")
    if source.get("type") == "base64" and isinstance(source.get("data"), str) \
            and isinstance(source.get("media_type"), str):
        url = f"data:{source['media_type']};base64,{source['data']}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise bad(f"{where}.source", "an image source must be base64 (media_type, data) "
                  "or url")
    return {"type": "image_url", "image_url": {"url": url}}


def _call(block: JSON, where: str) -> JSON:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id:
        raise bad(f"{where}.id", "a tool_use block needs an id")
    if not isinstance(name, str) or not name:
        raise bad(f"{where}.name", "a tool_use block needs a name")
    if not isinstance(arguments, dict):
        raise bad(f"{where}.input", "must be an object")
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}


def _tool_result(block: JSON, where: str, parts: list[JSON]) -> Message:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad(f"{where}.tool_use_id", "a tool_result needs the tool_use_id it answers")
    content = block.get("content", "")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for k, inner in enumerate(content):
            kind = _kind(inner, f"{where}.content.{k}")
            if kind not in ("text", "image", "document"):
                raise bad(f"{where}.content.{k}.type", f"unsupported block type {kind!r}")
            part = _part(inner, f"{where}.content.{k}")
            if part["type"] == "text":
                texts.append(part["text"])
            else:
                parts.append(part)  # a tool message carries no image: the user turn does
        text = "\n".join(texts)
    else:
        raise bad(f"{where}.content", "must be a string or a list of content blocks")
    if block.get("is_error") is True:
        # Chat has no error flag on a tool message: the model reads it in the text.
        text = f"Error: {text}" if text else "Error"
    return {"role": "tool", "tool_call_id": call_id, "content": text}


# --- tools -------------------------------------------------------------------


def split_tools(tools: list[Any]) -> tuple[list[ToolDef], int]:
    """Client tools as chat tools (validated); hosted tools counted and dropped."""
    kept: list[ToolDef] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise bad(f"tools.{i}", "must be an object")
        if tool.get("type") not in (None, "custom"):
            continue  # hosted (web_search_*, bash_*, text_editor_*, ...): nobody runs it
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise bad(f"tools.{i}.name", "a tool needs a name")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise bad(f"tools.{i}.input_schema", "must be a JSON schema object")
        function: JSON = {"name": name, "parameters": schema}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        kept.append({"type": "function", "function": function})
    return kept, len(tools) - len(kept)


def tool_choice(choice: JSON | None, names: set[str]) -> tuple[Any, bool | None]:
    """Messages tool_choice -> chat's `tool_choice` and `parallel_tool_calls` (None: not
    set). Checked even when no tool is left, so a malformed one is always a 400."""
    if choice is None:
        return None, None
    kind = choice.get("type")
    if kind == "none":
        return "none", None
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise bad("tool_choice.name", "a tool choice needs the tool's name")
        # A hosted tool's name: it was removed, and the choice goes with it.
        value: Any = {"type": "function", "function": {"name": name}} \
            if name in names else None
    elif kind in _CHOICES:
        value = _CHOICES[kind]
    else:
        raise bad("tool_choice.type", f"must be auto, any, tool or none; got {kind!r}")
    parallel = False if choice.get("disable_parallel_tool_use") is True else None
    return value, parallel


def _add_thinking(chat: ChatRequest, thinking: JSON | None) -> bool:
    """`thinking` to the backend's reasoning switch (`reasoning_effort`); whether the
    answer shows the model's reasoning.

    `adaptive` (Claude Code sends it to any model name) leaves the switch alone: a
    backend whose model cannot think would refuse an explicit effort."""
    kind = (thinking or {}).get("type")
    if kind is None:
        return False
    if kind == "disabled":
        chat["reasoning_effort"] = "none"
        return False
    if kind == "adaptive":
        return True
    if kind != "enabled":
        raise bad("thinking.type", f"must be enabled, adaptive or disabled; got {kind!r}")
    budget = (thinking or {}).get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise bad("thinking.budget_tokens", "must be a positive integer")
    chat["reasoning_effort"] = next((effort for bound, effort in THINKING_EFFORT
                                     if budget < bound), "high")
    return True
