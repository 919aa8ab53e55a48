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

from proxy.api.messages.blocks import bad, message_of, system_text, system_turn
from proxy.errors import ApiError
from proxy.types import JSON, ChatRequest, Message, ToolDef

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
            system.append(system_turn(message, f"messages.{i}"))
            continue
        messages.extend(message_of(message, f"messages.{i}"))
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
    elif isinstance(kind, str) and kind in _CHOICES:
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
