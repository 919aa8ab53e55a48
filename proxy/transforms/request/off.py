"""`off` mode: no tools upstream, the history's tool turns as plain text.

Owns stripping every tool field and turning assistant tool calls and tool
results into text a tool-less model (or template) accepts. Must not drop
what the conversation said: every call and result stays readable
(history.rewrite_tool_turns flattens the turns; this module renders them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from proxy.transforms.request.history import Call, rewrite_tool_turns
from proxy.transforms.request.system import add_system_text
from proxy.transforms.request.tools import TOOL_FIELDS, tool_name
from proxy.types import ChatRequest, Observation, Plan, Profile

STRIPPED_FIELDS = (*TOOL_FIELDS, "functions", "function_call")
OFF_NOTE = (
    "No tools are available in this conversation: do not write tool calls. "
    "Earlier tool calls and their results appear as plain text. Answer directly."
)

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
