"""A Responses API request body -> a chat completions request. Pure, no I/O.

The chat flow then does everything it does for chat (profile, tool policy,
retries, checks, recovery). Fields toolshim relies on are validated, and a
malformed body is a 400 naming the field; hosted tools (web_search,
file_search, ...) that no chat backend can run are removed and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, StrictBool, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic needs this one below Python 3.12

from proxy.api.responses.tools import chat_arguments, chat_tool, custom_tool_problem, kinds, name_of
from proxy.errors import ApiError, check_model_name
from proxy.types import JSON, ChatRequest, Message

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_PARTS = {"input_text", "output_text", "text", "summary_text", "reasoning_text"}
_CHOICE_MODES = {"auto", "none", "required"}

# A TypedDict, not a model: only the check is wanted (the body stays the client's
# dict), and pydantic checks a TypedDict in about half the time. Unknown fields pass.
@with_config(ConfigDict(extra="allow"))
class _Body(TypedDict):
    model: Annotated[str, Field(min_length=1)]
    input: str | list[dict[str, Any]]
    instructions: NotRequired[str | None]
    tools: NotRequired[list[dict[str, Any]] | None]
    tool_choice: NotRequired[str | dict[str, Any] | None]
    # "false" (a string) must not start a stream or store: booleans are strict, as for chat.
    parallel_tool_calls: NotRequired[StrictBool | None]
    max_output_tokens: NotRequired[Annotated[int | None, Field(ge=1)]]
    temperature: NotRequired[Annotated[float | None, Field(ge=0, le=2)]]
    top_p: NotRequired[Annotated[float | None, Field(ge=0, le=1)]]
    text: NotRequired[dict[str, Any] | None]
    reasoning: NotRequired[dict[str, Any] | None]
    metadata: NotRequired[dict[str, str] | None]
    user: NotRequired[str | None]
    store: NotRequired[StrictBool | None]
    stream: NotRequired[StrictBool | None]
    previous_response_id: NotRequired[Annotated[str | None, Field(min_length=1)]]


_BODY = TypeAdapter(_Body)


@dataclass
class Translated:
    """The chat request plus what the Responses side keeps for itself."""

    chat: ChatRequest
    tools: list[JSON]
    """the request's tools as echoed in the response (hosted ones removed)."""
    stripped: int
    conversation: list[Message] = field(default_factory=list)
    """history + this input, without instructions: what a continuation starts from."""
    kinds: dict[str, str] = field(default_factory=dict)
    """names of the `custom` / `local_shell` tools: their calls go back as those items."""


def bad(where: str, message: str) -> ApiError:
    return ApiError(400, f"invalid responses request: {where}: {message}", param=where,
                    code="invalid_request")


def validate(body: Any) -> JSON:
    """The decoded body, checked; a 400 naming the first bad field otherwise."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid request: the body must be a JSON object",
                       code="invalid_request")
    try:
        _BODY.validate_python(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        # The body's checked fields are all top-level; deeper loc parts name union members.
        raise bad(str(err["loc"][0]) if err["loc"] else "body", err["msg"]) from None
    check_model_name(body["model"])
    return body


def to_chat(body: JSON, history: list[Message]) -> Translated:
    """Translate a validated body; `history` is the stored conversation it continues."""
    current = input_messages(body["input"])
    conversation = [*history, *current]
    messages = list(conversation)
    if body.get("instructions"):
        messages.insert(0, {"role": "system", "content": body["instructions"]})
    if not messages:
        raise bad("input", "there is nothing to answer")
    tools, stripped = split_tools(body.get("tools") or [])
    chat: ChatRequest = {"model": body["model"], "messages": messages}
    _add_tools(chat, body, tools)
    _add_sampling(chat, body)
    return Translated(chat, tools, stripped, conversation, kinds(tools))


def _add_tools(chat: ChatRequest, body: JSON, tools: list[JSON]) -> None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        allowed = {t.get("name") for t in choice.get("tools") or [] if isinstance(t, dict)}
        tools = [t for t in tools if name_of(t) in allowed]
        choice = choice.get("mode", "auto")
    translated = tool_choice(choice, {name_of(t) or "" for t in tools})
    if not tools:
        return
    chat["tools"] = [chat_tool(t) for t in tools]
    if translated is not None:
        chat["tool_choice"] = translated
    if body.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]


def _add_sampling(chat: ChatRequest, body: JSON) -> None:
    for ours, theirs in (("temperature", "temperature"), ("top_p", "top_p"),
                         ("max_output_tokens", "max_tokens"), ("user", "user")):
        if body.get(ours) is not None:
            chat[theirs] = body[ours]
    response_format = _response_format((body.get("text") or {}).get("format"))
    if response_format is not None:
        chat["response_format"] = response_format
    effort = (body.get("reasoning") or {}).get("effort")
    if isinstance(effort, str):
        chat["reasoning_effort"] = effort
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}


def split_tools(tools: list[JSON]) -> tuple[list[JSON], int]:
    """Function, custom and local_shell tools kept (validated); every other (hosted)
    tool type counted and dropped: no chat backend can run those."""
    kept: list[JSON] = []
    for i, tool in enumerate(tools):
        kind = tool.get("type")
        if kind == "custom":
            problem = custom_tool_problem(tool)
            if problem is not None:
                raise bad(f"tools.{i}.{problem[0]}", problem[1])
        elif kind == "function":
            name = tool.get("name")
            if not isinstance(name, str) or not name:
                raise bad(f"tools.{i}.name", "a function tool needs a name")
            if tool.get("parameters") is not None and not isinstance(tool["parameters"], dict):
                raise bad(f"tools.{i}.parameters", "must be a JSON schema object")
        elif kind != "local_shell":
            continue
        kept.append(tool)
    return kept, len(tools) - len(kept)


def tool_choice(choice: Any, names: set[str]) -> Any:
    """Responses tool_choice -> chat's; a choice naming a removed hosted tool is dropped."""
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in _CHOICE_MODES:
            raise bad("tool_choice", f"must be one of auto, none, required; got {choice!r}")
        return choice
    if choice.get("type") in ("function", "custom"):
        name = choice.get("name")
        if not isinstance(name, str) or name not in names:
            raise bad("tool_choice.name", f"no {choice['type']} tool named {name!r}")
        return {"type": "function", "function": {"name": name}}
    if choice.get("type") == "local_shell" and "local_shell" in names:
        return {"type": "function", "function": {"name": "local_shell"}}
    return None


def _response_format(fmt: Any) -> JSON | None:
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    if fmt["type"] == "json_schema":
        if not isinstance(fmt.get("schema"), dict):
            raise bad("text.format.schema", "a json_schema format needs a schema object")
        schema = {k: fmt[k] for k in ("name", "schema", "description", "strict") if k in fmt}
        schema.setdefault("name", "response")
        return {"type": "json_schema", "json_schema": schema}
    raise bad("text.format.type", f"unsupported format {fmt['type']!r}")


def input_messages(items: str | list[JSON]) -> list[Message]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[Message] = []
    for i, item in enumerate(items):
        _take_item(item, f"input.{i}", messages)
    return messages


def _take_item(item: JSON, where: str, messages: list[Message]) -> None:
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        messages.append(_message(item, where))
    elif kind == "function_call":
        _function_call(item, where, messages)
    elif kind in ("custom_tool_call", "local_shell_call"):
        _own_call(item, where, messages)
    elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        # The SDK's local_shell_call_output names its call by `id`; Codex answers
        # every call with a `call_id`.
        call_id = item.get("call_id", item.get("id") if kind == "local_shell_call_output" else None)
        if not isinstance(call_id, str) or not call_id:
            raise bad(f"{where}.call_id", f"a {kind} needs the call's call_id")
        messages.append({"role": "tool", "tool_call_id": call_id,
                         "content": _output_text(item.get("output"), f"{where}.output")})
    elif kind == "reasoning":
        return  # the model's own earlier reasoning: accepted, never sent back upstream
    else:
        raise bad(f"{where}.type", f"unsupported input item type {kind!r}")


def _message(item: JSON, where: str) -> Message:
    role = _ROLES.get(item.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise bad(f"{where}.role", f"unsupported role {item.get('role')!r}")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise bad(f"{where}.content", "must be a string or a list of content parts")
    parts = [_part(p, f"{where}.content.{j}") for j, p in enumerate(content)]
    if role != "user" or all(p["type"] == "text" for p in parts):
        return {"role": role, "content": "".join(p.get("text", "") for p in parts)}
    return {"role": role, "content": parts}


def _part(part: Any, where: str) -> JSON:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in _TEXT_PARTS or kind == "refusal":
        text = part.get("text", part.get("refusal"))
        if not isinstance(text, str):
            raise bad(f"{where}.text", "must be a string")
        return {"type": "text", "text": text}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            raise bad(f"{where}.image_url", "an input_image needs an image_url (URL or data URL)")
        image: JSON = {"url": url}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    raise bad(f"{where}.type", f"unsupported content part type {kind!r}")


def _function_call(item: JSON, where: str, messages: list[Message]) -> None:
    for key in ("call_id", "name", "arguments"):
        if not isinstance(item.get(key), str):
            raise bad(f"{where}.{key}", "must be a string")
    _append_call(item["call_id"], item["name"], item["arguments"], messages)


def _own_call(item: JSON, where: str, messages: list[Message]) -> None:
    """A custom_tool_call / local_shell_call the model made earlier, as a chat call."""
    custom = item["type"] == "custom_tool_call"
    keys = ("call_id", "name", "input") if custom else ("call_id",)
    for key in keys:
        if not isinstance(item.get(key), str):
            raise bad(f"{where}.{key}", "must be a string")
    if not custom and not isinstance(item.get("action"), dict):
        raise bad(f"{where}.action", "a local_shell_call needs its exec action")
    name = item["name"] if custom else "local_shell"
    _append_call(item["call_id"], name, chat_arguments(item), messages)


def _append_call(call_id: str, name: str, arguments: str, messages: list[Message]) -> None:
    call = {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        # Calls that follow the assistant's text (or other calls) are one chat turn.
        last.setdefault("tool_calls", []).append(call)
        return
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _output_text(output: Any, where: str) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(_part(p, f"{where}.{j}").get("text", "") for j, p in enumerate(output)
                       if not (isinstance(p, dict) and p.get("type") == "input_image"))
    raise bad(where, "must be a string or a list of content parts")
