"""`tool_choice` and `parallel_tool_calls` the model can't honour.

Owns dropping those two request fields per profile and plan. Must not touch
the tools themselves; the response side enforces "one call" when the
parallel_tool_calls parameter is dropped here.
"""

from __future__ import annotations

from typing import Any

from proxy.types import ChatRequest, Observation, Plan, Profile


def choice_kind(choice: Any) -> str | None:
    """"none" | "auto" | "required" | "function" (a named function) | other type."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict) and isinstance(choice.get("type"), str):
        return str(choice["type"])
    return None


def apply_choice(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """Remove tool_choice / parallel_tool_calls where profile or plan says so."""
    drop_choice = "tool_choice" in request and (
        plan.drop_tool_choice or choice_kind(request["tool_choice"]) in profile.drop_tool_choice
    )
    # Backends without parallel calls either reject the field or ignore it
    # silently; dropping it keeps the request valid everywhere.
    drop_parallel = "parallel_tool_calls" in request and profile.parallel_tool_calls is False
    if not drop_choice and not drop_parallel:
        return request, []
    out = dict(request)
    if drop_choice:
        del out["tool_choice"]
    if drop_parallel:
        del out["parallel_tool_calls"]
    return out, []
