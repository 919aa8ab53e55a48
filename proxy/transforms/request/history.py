"""The history's tool turns: reading assistant calls, flattening turns to text.

Owns: the one reader of the calls an assistant message made (`tool_calls` and
legacy `function_call`), the names a conversation already called, and
`rewrite_tool_turns`, which `off` and `emulate` modes both use to turn calls
and tool results into text, each with its own rendering. Must not decide how
a turn is rendered or drop what the conversation said.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from proxy.transforms.request.content import add_text, content_text, join_contents
from proxy.types import Message

Call = tuple[str, str, str]
"""(id, name, arguments JSON text) of one call in an assistant turn."""
RenderCalls = Callable[[Sequence[Call]], str]
RenderResult = Callable[[str, str, str], str]
"""(name, tool_call_id, content text) -> the text of a user turn."""


def history_calls(message: Message) -> list[Call]:
    """The calls of an assistant message, legacy `function_call` included."""
    raw = [c for c in message.get("tool_calls") or () if isinstance(c, dict)]
    if isinstance(message.get("function_call"), dict):
        raw.append({"id": "", "function": message["function_call"]})
    calls: list[Call] = []
    for call in raw:
        found = call.get("function")
        function: dict[str, Any] = found if isinstance(found, dict) else {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append((str(call.get("id") or ""), str(function.get("name") or ""), arguments))
    return calls


def result_text(content: Any) -> str:
    """A tool message's content as text (some clients send JSON values)."""
    if isinstance(content, (str, list)) or content is None:
        return content_text(content)
    return json.dumps(content, ensure_ascii=False)


def called_names(messages: Iterable[Message]) -> list[str]:
    """Function names the conversation already called, first call first."""
    return [name for message in messages
            if isinstance(message, dict) and message.get("role") == "assistant"
            for _, name, _ in history_calls(message) if name]


def _append(out: list[Message], converted: list[bool], message: Message, mine: bool) -> None:
    """Append, merging with the previous turn of the same role when either was
    produced here: several templates (Llama, Mistral, Gemma) require roles to
    alternate, and one call turn often has several results."""
    previous = out[-1] if out else None
    role = message.get("role") if isinstance(message, dict) else None
    if (
        isinstance(previous, dict) and role in ("user", "assistant")
        and previous.get("role") == role and (mine or converted[-1])
    ):
        content = join_contents(previous.get("content"), message.get("content"))
        out[-1] = {**previous, "content": content}
        converted[-1] = True
        return
    out.append(message)
    converted.append(mine)


def rewrite_tool_turns(
    messages: Sequence[Message], render_calls: RenderCalls, render_result: RenderResult
) -> list[Message]:
    """Assistant tool calls -> assistant text; tool results -> user text."""
    out: list[Message] = []
    converted: list[bool] = []
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant" and ("tool_calls" in message or "function_call" in message):
            calls = history_calls(message)
            names.update((call_id, name) for call_id, name, _ in calls)
            text = render_calls(calls) if calls else ""
            kept = {k: v for k, v in message.items() if k not in ("tool_calls", "function_call")}
            kept["content"] = add_text(message.get("content"), text, "end")
            _append(out, converted, kept, True)
        elif role in ("tool", "function"):
            call_id = str(message.get("tool_call_id") or "")
            name = str(message.get("name") or names.get(call_id, ""))
            text = render_result(name, call_id, result_text(message.get("content")))
            _append(out, converted, {"role": "user", "content": text}, True)
        else:
            _append(out, converted, message, False)
    return out
