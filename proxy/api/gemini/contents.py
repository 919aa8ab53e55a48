"""Gemini `contents[]` -> chat messages. Pure, no I/O.

A `model` turn's `functionCall` parts become one assistant message's `tool_calls`;
the `functionResponse` parts of the turn after it become `tool` messages. Chat
needs every tool message to name the call it answers, Gemini does not: a call and
its response are paired by `id` when the response's id names a call of the turn
before, else by name and order within that turn, and the call gets an id when the
client sent none, so the chat history has matching ids either way. `thought` parts
and `thoughtSignature` are accepted and not forwarded (toolshim drops history
reasoning on every door).
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.api.gemini.schema import bad, camel
from proxy.types import JSON, Message

_ROLES = {"user": "user", "model": "assistant", "function": "user", "tool": "user"}
_RESULT_KEYS = ("output", "result", "content")
"""a response object of one of these keys alone is that text (Gemini CLI sends
`{"output": ...}`); any other object is its JSON."""


def to_messages(contents: list[Any]) -> list[Message]:
    messages: list[Message] = []
    pending: list[tuple[str, str]] = []
    """(call id, name) of the last model turn's calls not answered yet."""
    for i, content in enumerate(contents):
        field = f"contents[{i}]"
        if not isinstance(content, dict):
            raise bad(field, "a Content must be an object")
        role = content.get("role") or "user"
        if not isinstance(role, str) or role not in _ROLES:
            raise bad(f"{field}.role", f"must be user or model; got {role!r}")
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise bad(f"{field}.parts", "must be a list of Parts")
        if _ROLES[role] == "assistant":
            message, pending = _model_turn(parts, field, turn=i)
            if message is not None:
                messages.append(message)
        else:
            messages.extend(_user_turn(parts, field, pending))
    return messages


def _model_turn(parts: list[Any], field: str, *, turn: int) -> tuple[Message | None,
                                                                       list[tuple[str, str]]]:
    texts: list[str] = []
    calls: list[JSON] = []
    seen: set[str] = set()
    for j, part in enumerate(parts):
        where = f"{field}.parts[{j}]"
        kind = _kind(part, where)
        part = camel(part)
        if kind == "text" and not part.get("thought"):
            texts.append(part["text"])
        elif kind == "functionCall":
            call = part["functionCall"]
            name, args = _call(call, f"{where}.functionCall")
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id or call_id in seen:
                call_id = f"call_{turn}_{j}"  # stable: the same history gets the same ids
            seen.add(call_id)
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": name, "arguments": orjson.dumps(args).decode()}})
        elif kind not in ("text", "thought"):
            raise bad(where, f"a model turn cannot carry {kind}")
    if not texts and not calls:
        return None, []
    message: Message = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message, [(c["id"], c["function"]["name"]) for c in calls]


def _user_turn(parts: list[Any], field: str, pending: list[tuple[str, str]]) -> list[Message]:
    tools: list[Message] = []
    content: list[JSON] = []
    for j, part in enumerate(parts):
        where = f"{field}.parts[{j}]"
        kind = _kind(part, where)
        part = camel(part)
        if kind == "text":
            if not part.get("thought"):
                content.append({"type": "text", "text": part["text"]})
        elif kind == "inlineData":
            content.append(_image(part["inlineData"], f"{where}.inlineData"))
        elif kind == "thought":
            continue
        elif kind == "functionResponse":
            tools.append(_response(part["functionResponse"], f"{where}.functionResponse",
                                   pending))
        else:
            raise bad(where, f"{kind} cannot be served: send the content inline")
    out = tools
    if content:
        plain = all(c["type"] == "text" for c in content)
        out.append({"role": "user", "content": "".join(c["text"] for c in content)
                    if plain else content})
    return out


def _kind(part: Any, where: str) -> str:
    """The Part's data field (one of text, inlineData, fileData, functionCall, ...)."""
    if not isinstance(part, dict):
        raise bad(where, "a Part must be an object")
    part = camel(part)
    for key in ("text", "functionCall", "functionResponse", "inlineData", "fileData",
                "executableCode", "codeExecutionResult"):
        if key in part:
            if key == "text" and not isinstance(part["text"], str):
                raise bad(f"{where}.text", "must be a string")
            return key
    if part.get("thought") or "thoughtSignature" in part:
        return "thought"  # a signature or a thought with no text: nothing to forward
    raise bad(where, "a Part needs one of text, inlineData, functionCall, functionResponse")


def _call(call: Any, where: str) -> tuple[str, JSON]:
    if not isinstance(call, dict):
        raise bad(where, "must be an object")
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise bad(f"{where}.name", "a function call needs a name")
    args = call.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise bad(f"{where}.args", "must be an object")
    return name, args


def _response(response: Any, where: str, pending: list[tuple[str, str]]) -> Message:
    if not isinstance(response, dict):
        raise bad(where, "must be an object")
    name = response.get("name")
    if not isinstance(name, str) or not name:
        raise bad(f"{where}.name", "a function response needs the function's name")
    given = response.get("id")
    match = next((p for p in pending if p[0] == given), None) if given else None
    if match is None:  # no id, or one the client made up: the first open call of the name
        match = next((p for p in pending if p[1] == name), None)
    if match is None:
        raise bad(where, f"answers no functionCall named {name!r} in the model turn before it")
    pending.remove(match)
    return {"role": "tool", "tool_call_id": match[0], "content": _result_text(
        response.get("response"), f"{where}.response")}


def _result_text(result: Any, where: str) -> str:
    if result is None:
        return ""
    if not isinstance(result, dict):
        raise bad(where, "must be an object")
    if len(result) == 1:
        key, value = next(iter(result.items()))
        if key in _RESULT_KEYS and isinstance(value, str):
            return value
    return orjson.dumps(result).decode()


def _image(data: Any, where: str) -> JSON:
    if not isinstance(data, dict):
        raise bad(where, "must be an object")
    data = camel(data)
    mime, payload = data.get("mimeType"), data.get("data")
    if not isinstance(mime, str) or not mime.startswith("image/"):
        raise bad(f"{where}.mimeType", f"only images can be served inline; got {mime!r}")
    if not isinstance(payload, str) or not payload:
        raise bad(f"{where}.data", "must be base64 data")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{payload}"}}
