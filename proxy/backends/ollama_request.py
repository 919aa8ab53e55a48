"""An OpenAI chat request -> the body of Ollama's native `POST /api/chat`.

Pure and sans-IO. Follows what Ollama's own /v1 layer does (openai/openai.go
`FromChatRequest`), with two differences: a message's text parts stay one message
(its images go beside them), and absent temperature/top_p are not forced to 1.0, so
the Modelfile's defaults hold. Input the native API cannot take is an ApiError 400
with Ollama's wording, never a silent change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from proxy.errors import ApiError
from proxy.types import JSON, ChatRequest, Message

# OpenAI sampling fields that are native `options` of the same name.
_SAME_NAME_OPTIONS = ("temperature", "top_p", "seed", "frequency_penalty", "presence_penalty")

# reasoning_effort -> native `think` (Ollama's thinkFromReasoningEffort).
_THINK: Mapping[str, bool | str] = {
    "none": False, "minimal": "low", "low": "low", "medium": "medium", "high": "high",
    "max": "max", "xhigh": "max", "ultra": "max",
}


def to_native(request: ChatRequest, *, num_ctx: int | None = None,
              keep_alive: str | int | None = None,
              ollama_options: Mapping[str, Any] | None = None) -> JSON:
    """The /api/chat body for `request` (already rewritten by the request steps)."""
    messages = request.get("messages") or []
    body: JSON = {"model": request["model"],
                  "messages": [_message(m, messages) for m in messages if isinstance(m, dict)],
                  "stream": bool(request.get("stream"))}
    if request.get("tools"):
        body["tools"] = request["tools"]
    fmt = _format(request.get("response_format"))
    if fmt is not None:
        body["format"] = fmt
    think = _think(request)
    if think is not None:
        body["think"] = think
    if keep_alive is not None:
        body["keep_alive"] = keep_alive
    options = _options(request, ollama_options)
    if num_ctx is not None:
        options["num_ctx"] = num_ctx
    if options:
        body["options"] = options
    return body


def _options(request: ChatRequest, configured: Mapping[str, Any] | None) -> JSON:
    # The person's ollama_options first; what this request asks for wins over them.
    options: JSON = dict(configured or {})
    for name in _SAME_NAME_OPTIONS:
        if request.get(name) is not None:
            options[name] = request[name]
    limit = request.get("max_completion_tokens", request.get("max_tokens"))
    if isinstance(limit, int) and not isinstance(limit, bool):
        options["num_predict"] = limit
    stop = request.get("stop")
    if isinstance(stop, str):
        options["stop"] = [stop]
    elif isinstance(stop, list):
        options["stop"] = [s for s in stop if isinstance(s, str)]
    return options


def _format(response_format: Any) -> Any:
    if not isinstance(response_format, dict):
        return None
    kind = str(response_format.get("type", "")).strip().lower()
    if kind == "json_object":
        return "json"
    if kind == "json_schema":
        schema = response_format.get("json_schema")
        return schema.get("schema") if isinstance(schema, dict) else None
    return None


def _think(request: ChatRequest) -> bool | str | None:
    reasoning = request.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    effort = effort if effort is not None else request.get("reasoning_effort")
    if effort is None or effort == "":
        return None
    if not isinstance(effort, str) or effort not in _THINK:
        raise ApiError(400, f"invalid reasoning value: {effort!r} (must be one of "
                       + ", ".join(sorted(_THINK)) + ")", param="reasoning_effort")
    return _THINK[effort]


def _message(message: Message, history: list[Any]) -> JSON:
    role = str(message.get("role", "user"))
    # OpenAI's "developer" role is the system prompt; Ollama's templates know only "system".
    out: JSON = {"role": "system" if role == "developer" else role}
    text, images = _content(message.get("content"))
    out["content"] = text
    if images:
        out["images"] = images
    thinking = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(thinking, str) and thinking:
        out["thinking"] = thinking
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [_call(call, i) for i, call in enumerate(calls)]
    if out["role"] == "tool":
        call_id = message.get("tool_call_id")
        name = message.get("name") or _name_of_call(history, call_id)
        if isinstance(name, str) and name:
            out["tool_name"] = name
        if isinstance(call_id, str) and call_id:
            out["tool_call_id"] = call_id
    return out


def _content(content: Any) -> tuple[str, list[str]]:
    """Text and base64 images of an OpenAI content (a string or a list of parts)."""
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        return "", []
    texts: list[str] = []
    images: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "image_url":
            images.append(_image(part.get("image_url")))
    return "".join(texts), images


def _image(image_url: Any) -> str:
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    if not isinstance(url, str):
        raise ApiError(400, "invalid image input", param="messages")
    if url.startswith(("http://", "https://")):
        # Ollama fetches nothing itself; same wording as its /v1 layer.
        raise ApiError(400, "image URLs are not currently supported, please use base64 "
                       "encoded data instead", param="messages")
    if url.startswith("data:"):
        header, sep, data = url.partition(",")
        if not sep or not header.endswith(";base64"):
            raise ApiError(400, "invalid image input", param="messages")
        return data
    return url  # bare base64, as /api/chat itself takes it


def _call(call: Any, index: int) -> JSON:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise ApiError(400, "invalid tool call arguments", param="messages")
    raw = function.get("arguments")
    try:
        arguments = orjson.loads(raw) if isinstance(raw, (str, bytes)) and raw else raw or {}
    except orjson.JSONDecodeError:
        raise ApiError(400, "invalid tool call arguments", param="messages") from None
    if not isinstance(arguments, dict):
        raise ApiError(400, "invalid tool call arguments", param="messages")
    out: JSON = {"function": {"index": index, "name": str(function.get("name", "")),
                              "arguments": arguments}}
    if isinstance(call.get("id"), str):
        out["id"] = call["id"]
    return out


def _name_of_call(history: list[Any], call_id: Any) -> str | None:
    """The function a tool result answers, found by its call id (last one wins)."""
    if not isinstance(call_id, str):
        return None
    for message in reversed(history):
        for call in (message.get("tool_calls") or []) if isinstance(message, dict) else []:
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function")
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    return str(function["name"])
    return None
