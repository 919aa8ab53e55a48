"""Tool selection: allow_tools, deny_tools, then the max_tools budget.

Owns which of the client's tools reach the model (natively or described for
emulation). Must not rename tools or touch their schemas, and does nothing in
`off` mode, where every tool is stripped anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any

from proxy.transforms.request.history import called_names
from proxy.types import ChatRequest, Observation, Plan, Profile, ToolDef

TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")
"""Request fields that only make sense while tools are sent."""


def tool_name(tool: ToolDef) -> str:
    """The function name of a tool definition ("" when the client sent none)."""
    function = tool.get("function")
    if isinstance(function, dict):
        name = function.get("name")
        if isinstance(name, str):
            return name
    return ""


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def _budget(tools: Sequence[ToolDef], used: Sequence[str], limit: int) -> list[ToolDef]:
    """Keep `limit` tools: already-called ones first, then the client's order.

    The kept tools stay in the client's order so the prompt prefix stays
    stable between turns (backends cache it).
    """
    used_set = set(used)
    ranked = sorted(range(len(tools)), key=lambda i: (tool_name(tools[i]) not in used_set, i))
    keep = set(ranked[: max(limit, 0)])
    return [tool for i, tool in enumerate(tools) if i in keep]


def _stripped(profile: Profile, removed: Sequence[ToolDef], reason: str) -> Observation:
    names = [tool_name(tool) for tool in removed]
    detail = {"count": len(names), "names": names, "reason": reason}
    return Observation(profile.model, "tools_stripped", detail)


def _choice_name(choice: Any) -> str | None:
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None


def _filter(
    request: ChatRequest, profile: Profile
) -> tuple[list[ToolDef], list[Observation]]:
    tools = [tool for tool in request["tools"] if isinstance(tool, dict)]
    observations: list[Observation] = []
    if profile.allow_tools is not None:
        allowed = profile.allow_tools
        removed = [t for t in tools if not _matches(tool_name(t), allowed)]
        tools = [t for t in tools if _matches(tool_name(t), allowed)]
        if removed:
            observations.append(_stripped(profile, removed, "allow"))
    if profile.deny_tools:
        removed = [t for t in tools if _matches(tool_name(t), profile.deny_tools)]
        tools = [t for t in tools if not _matches(tool_name(t), profile.deny_tools)]
        if removed:
            observations.append(_stripped(profile, removed, "deny"))
    if profile.max_tools is not None and len(tools) > profile.max_tools:
        kept = _budget(tools, called_names(request.get("messages") or ()), profile.max_tools)
        removed = [t for t in tools if not any(t is k for k in kept)]
        tools = kept
        observations.append(_stripped(profile, removed, "max_tools"))
    return tools, observations


def select_tools(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """Apply allow_tools, deny_tools and max_tools to `request["tools"]`."""
    if plan.tools == "off":
        return request, []
    if not isinstance(request.get("tools"), list):
        # tool_choice without tools is a 400 on vLLM and OpenAI alike.
        if any(key in request for key in TOOL_FIELDS):
            return {k: v for k, v in request.items() if k not in TOOL_FIELDS}, []
        return request, []
    tools, observations = _filter(request, profile)
    if not observations and tools:
        return request, []
    out = dict(request)
    out["tools"] = tools
    kept_names = {tool_name(tool) for tool in tools}
    choice = _choice_name(out.get("tool_choice"))
    if choice is not None and choice not in kept_names:
        # Backends reject a tool_choice naming a tool that isn't sent.
        del out["tool_choice"]
        detail = {"name": choice, "reason": "tool_removed"}
        observations.append(Observation(profile.model, "tool_choice_dropped", detail))
    if not tools:
        # An empty `tools` list is a 400 on several backends (vLLM, OpenRouter).
        for key in TOOL_FIELDS:
            out.pop(key, None)
    return out, observations
