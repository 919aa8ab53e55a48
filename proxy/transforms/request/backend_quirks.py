"""Request rewrites for what a backend can't take as OpenAI specifies it.

Owns four rewrites, each switched on by a profile field (set by hand in
capabilities.yaml or learned by quirks.py from what the backend did):
`implicit_tool_choice` (tools without tool_choice: send OpenAI's default
explicitly, since some servers ignore tools otherwise), `required_tool_choice:
rewrite` (`required` -> the one tool by name, or `auto` plus a system note),
`null_content: false` (assistant tool-call turns with `content: null` -> `""`)
and `stream_tools: false` (a streamed request with tools is sent whole; the
upstream edge streams the answer to the client itself).
Must not: add tools, or change what the client's messages say.
"""

from __future__ import annotations

from typing import Any

from proxy.transforms.request.choice import choice_kind
from proxy.transforms.request.content import add_text
from proxy.types import ChatRequest, Message, Observation, Plan, Profile

REQUIRED_NOTE = "You must answer by calling one of the provided tools."


def _native_tools(request: ChatRequest, plan: Plan) -> list[Any]:
    tools = request.get("tools")
    return tools if plan.tools == "native" and isinstance(tools, list) and tools else []


def fill_tool_choice(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """Tools without tool_choice get the profile's implicit value (OpenAI's `auto`)."""
    # Runs before apply_choice, which drops the value again where the profile
    # or the retry plan says the backend refuses it.
    value = profile.implicit_tool_choice
    if value is None or "tool_choice" in request or not _native_tools(request, plan):
        return request, []
    return {**request, "tool_choice": value}, []


def rewrite_required(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """`required` the backend can't honour: name the only tool, else `auto` + a note."""
    tools = _native_tools(request, plan)
    if profile.required_tool_choice != "rewrite" or not tools \
            or choice_kind(request.get("tool_choice")) != "required":
        return request, []
    names = [_tool_name(t) for t in tools]
    if len(names) == 1 and names[0]:
        choice: Any = {"type": "function", "function": {"name": names[0]}}
        return {**request, "tool_choice": choice}, []
    return {**request, "tool_choice": "auto",
            "messages": _with_system_note(request.get("messages") or [], REQUIRED_NOTE)}, []


def fill_null_content(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """`content: null` beside tool calls -> `""` for backends that want a string."""
    messages = request.get("messages")
    if profile.null_content or not isinstance(messages, list) \
            or not any(_null_call_turn(m) for m in messages):
        return request, []
    fixed = [{**m, "content": ""} if _null_call_turn(m) else m for m in messages]
    return {**request, "messages": fixed}, []


def unstream_tools(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """A backend that can't stream with tools is asked for the whole answer."""
    if profile.stream_tools or not request.get("stream") or not _native_tools(request, plan):
        return request, []
    return without_stream(request), []


def without_stream(request: ChatRequest) -> ChatRequest:
    """The same request, non-streaming (stream_options is only valid with stream)."""
    return {k: v for k, v in request.items() if k not in ("stream", "stream_options")}


def has_null_call_turn(request: ChatRequest) -> bool:
    messages = request.get("messages")
    return isinstance(messages, list) and any(_null_call_turn(m) for m in messages)


def _null_call_turn(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant" \
        and message.get("content") is None and bool(message.get("tool_calls"))


def _tool_name(tool: Any) -> str:
    fn = tool.get("function") if isinstance(tool, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    return name if isinstance(name, str) else ""


def _with_system_note(messages: list[Message], note: str) -> list[Message]:
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": add_text(first.get("content"), note, "end")}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]
