"""`off` mode: no tools upstream, the history's tool turns as plain text.

Owns stripping every tool field and turning assistant tool calls and tool
results into text a tool-less model (or template) accepts. Must not drop
what the conversation said: every call and result stays readable.
`rewrite_tool_turns` is shared with emulate mode, which renders differently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from proxy.transforms.request.content import add_text, content_text, join_contents
from proxy.transforms.request.system import add_system_text
from proxy.transforms.request.tools import TOOL_FIELDS, tool_name
from proxy.types import ChatRequest, Message, Observation, Plan, Profile

STRIPPED_FIELDS = (*TOOL_FIELDS, "functions", "function_call")
OFF_NOTE = (
    "No tools are available in this conversation: do not write tool calls. "
    "Earlier tool calls and their results appear as plain text. Answer directly."
)

Call = tuple[str, str, str]
"""(id, name, arguments JSON text) of one call in an assistant turn."""
RenderCalls = Callable[[Sequence[Call]], str]
RenderResult = Callable[[str, str, str], str]
"""(name, tool_call_id, content text) -> the text of a user turn."""


def has_tool_traffic(request: ChatRequest) -> bool:
    """Whether the client sent tools, or the history holds tool turns."""
    if request.get("tools") or request.get("functions"):
        return True
    for message in request.get("messages") or ():
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("tool", "function"):
            return True
        if "tool_calls" in message or "function_call" in message:
            return True
    return False


def strip_tool_fields(request: ChatRequest) -> ChatRequest:
    """`request` without any tool field (modern or legacy)."""
    return {k: v for k, v in request.items() if k not in STRIPPED_FIELDS}


def calls_of(message: Message) -> list[Call]:
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
            calls = calls_of(message)
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


def _render_call(call: Call) -> str:
    _, name, arguments = call
    try:
        arguments = json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        pass  # shown as the model wrote it: still informative as text
    return f"[called {name}({arguments})]"


def _render_calls(calls: Sequence[Call]) -> str:
    return "\n".join(_render_call(call) for call in calls)


def _render_result(name: str, call_id: str, content: str) -> str:
    label = " ".join(p for p in (name or "a tool", f"({call_id})" if call_id else "") if p)
    return f"[result of {label}]: {content}"


def strip_tools_off(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """In `off` mode: no tool fields, tool turns as text, a system note."""
    if plan.tools != "off":
        return request, []
    out = strip_tool_fields(request)
    if isinstance(request.get("messages"), list):
        messages = rewrite_tool_turns(request["messages"], _render_calls, _render_result)
        # The note only where tools were in play: plain chats stay as sent.
        if has_tool_traffic(request):
            messages = add_system_text(messages, OFF_NOTE)
        out["messages"] = messages
    tools = request.get("tools")
    if not isinstance(tools, list) or not tools:
        return out, []
    return out, [Observation(profile.model, "tools_stripped",
                             {"count": len(tools), "names": [tool_name(t) for t in tools],
                              "reason": "off"})]
