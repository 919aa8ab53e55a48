"""`emulate` mode: tools described in the system prompt, in the model's format.

Owns the request side of emulation: tool fields stripped, the selected
(renamed, rewritten) tools rendered into the system prompt by the profile's
text format, and the history's tool turns rendered in that same format so
the model sees its own convention. Must not parse model output (the response
side recovers the calls) or know any format's syntax itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from proxy.formats import DEFAULT_EMULATE_FORMAT, get_format
from proxy.formats.base import ParsedCall, TextFormat
from proxy.transforms.request.history import Call, rewrite_tool_turns
from proxy.transforms.request.off import has_tool_traffic, strip_tool_fields
from proxy.transforms.request.system import add_system_text
from proxy.types import ChatRequest, Observation, Plan, Profile, ToolDef


def _arguments(text: str) -> dict[str, Any]:
    """A history call's arguments as an object; text that isn't one is kept
    under "arguments" rather than lost."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def _offered(request: ChatRequest) -> list[ToolDef]:
    """The tools to describe: none when the client said tool_choice "none"."""
    if request.get("tool_choice") == "none" or request.get("function_call") == "none":
        return []
    tools = request.get("tools")
    if isinstance(tools, list) and tools:
        return [t for t in tools if isinstance(t, dict)]
    legacy = request.get("functions")
    if isinstance(legacy, list):
        return [{"type": "function", "function": f} for f in legacy if isinstance(f, dict)]
    return []


def _choice_note(request: ChatRequest) -> str:
    """tool_choice and parallel_tool_calls as instructions: there is no other
    way to tell a model that only sees text."""
    notes = []
    choice = request.get("tool_choice")
    if choice == "required":
        notes.append("You must call at least one tool in your reply.")
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        notes.append(f"You must call the tool {choice['function'].get('name')} in your reply.")
    if request.get("parallel_tool_calls") is False:
        notes.append("Call at most one tool per reply.")
    return " ".join(notes)


def emulate_with(request: ChatRequest, fmt: TextFormat) -> ChatRequest:
    """`request` for a model that only sees tools as text written in `fmt`."""
    out = strip_tool_fields(request)
    if not has_tool_traffic(request) or not isinstance(request.get("messages"), list):
        return out

    def render_calls(calls: Sequence[Call]) -> str:
        return fmt.render_calls([ParsedCall(name, _arguments(args)) for _, name, args in calls])

    def render_result(name: str, call_id: str, content: str) -> str:
        return fmt.render_result(name, content)

    messages = rewrite_tool_turns(request["messages"], render_calls, render_result)
    tools = _offered(request)
    if tools:
        text = fmt.render_tools(tools)
        note = _choice_note(request)
        messages = add_system_text(messages, f"{text}\n\n{note}" if note else text)
    out["messages"] = messages
    return out


def emulate_tools(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """In `emulate` mode: tools as text in profile.tool_format (default hermes)."""
    if plan.tools != "emulate":
        return request, []
    name = profile.tool_format or DEFAULT_EMULATE_FORMAT
    out = emulate_with(request, get_format(name))
    # The size the description added, for the log line: it costs the model's window.
    added = _text_size(out) - _text_size(request)
    return out, [Observation(profile.model, "tools_emulated",
                             {"format": name, "chars": max(added, 0)})]


def _text_size(request: ChatRequest) -> int:
    """Characters of message text in `request` (string contents; cheap, no encoding)."""
    return sum(len(m["content"]) for m in request.get("messages") or ()
               if isinstance(m, dict) and isinstance(m.get("content"), str))
