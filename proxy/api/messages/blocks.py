"""Anthropic Messages content blocks -> chat messages. Pure, no I/O.

Text, images (base64 and url sources), plain-text documents, the assistant's
`tool_use` blocks (chat `tool_calls`) and the user's `tool_result` blocks (chat
`tool` messages, placed right after the call as chat wants them); the model's
earlier thinking and hosted-tool blocks are accepted and not sent. Anything else
is a 400 naming the block.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.errors import ApiError
from proxy.types import JSON, Message

# Blocks that record what a hosted tool did: the chat backend never ran it, so the
# conversation goes on without them (as Ollama's and LiteLLM's converters do).
_HOSTED_BLOCKS = {"server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
                  "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result"}
# The model's own earlier reasoning: accepted, never sent back as text.
_THINKING_BLOCKS = {"thinking", "redacted_thinking"}


def bad(where: str, message: str) -> ApiError:
    return ApiError(400, f"{where}: {message}", param=where, code="invalid_request")


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


def system_turn(message: JSON, where: str) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return system_text(content) if content else ""
    raise bad(f"{where}.content", "must be a string or a list of text blocks")


def message_of(message: JSON, where: str) -> list[Message]:
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
