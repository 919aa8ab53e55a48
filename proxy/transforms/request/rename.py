"""Tool renames: client names become the names the model knows.

Owns `profile.rename` on the way up (tools, named tool_choice, history calls
and tool messages) and the reverse map the response side uses on the way
back. Must not drop or reorder anything.
"""

from __future__ import annotations

from typing import Any

from proxy.types import ChatRequest, Message, Observation, Plan, Profile


def reverse_rename(profile: Profile) -> dict[str, str]:
    """upstream name -> client name, for calls coming back from the model."""
    return {upstream: client for client, upstream in profile.rename}


def _renamed_function(holder: Any, names: dict[str, str]) -> Any:
    """`holder` with `holder["function"]["name"]` renamed, or unchanged."""
    if not isinstance(holder, dict):
        return holder
    function = holder.get("function")
    if not isinstance(function, dict) or function.get("name") not in names:
        return holder
    return {**holder, "function": {**function, "name": names[function["name"]]}}


def _renamed_message(message: Message, names: dict[str, str]) -> Message:
    if not isinstance(message, dict):
        return message
    out = message
    calls = message.get("tool_calls")
    if message.get("role") == "assistant" and isinstance(calls, list):
        renamed = [_renamed_function(call, names) for call in calls]
        if any(new is not old for new, old in zip(renamed, calls)):
            out = {**out, "tool_calls": renamed}
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and legacy.get("name") in names:
        out = {**out, "function_call": {**legacy, "name": names[legacy["name"]]}}
    if message.get("role") in ("tool", "function") and message.get("name") in names:
        out = {**out, "name": names[message["name"]]}
    return out


def apply_rename(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """Rename client tool names to upstream names everywhere they travel."""
    names = dict(profile.rename)
    if not names:
        return request, []
    out = dict(request)
    if isinstance(request.get("tools"), list):
        out["tools"] = [_renamed_function(tool, names) for tool in request["tools"]]
    if "tool_choice" in request:
        out["tool_choice"] = _renamed_function(request["tool_choice"], names)
    if isinstance(request.get("messages"), list):
        out["messages"] = [_renamed_message(m, names) for m in request["messages"]]
    return out, []
