"""The retry ladder for tool refusals: which Plan to try first, and which next.

Pure policy (like httpx's Auth.auth_flow): the route sends, classifies the
answer with refusals.classify_refusal, and asks next_plan what to do. This
module never sends anything, never learns anything and never loops: each step
goes strictly down the ladder native -> native without tool_choice -> fallback
(off or emulate), and there are at most two retries.
"""

from __future__ import annotations

from proxy.backends.refusals import Refusal
from proxy.types import Plan, Profile, ToolMode

MAX_RETRIES = 2


def tool_mode(profile: Profile) -> ToolMode:
    """The mode a request with tools gets: a model known to lack native tools
    (`tool_support`) goes to the fallback in force, which a person may change after
    the fact was learned; a person's explicit `tools:` still wins."""
    if profile.tools in ("off", "emulate"):
        return profile.tools
    if profile.tool_support is not None and _may_step_down(profile):
        return profile.fallback
    return profile.tools


def initial_plan(profile: Profile, has_tools: bool) -> Plan:
    """The first rung for a request, from the model's resolved tool mode."""
    if not has_tools:
        return Plan("native")  # nothing to strip or describe
    mode = tool_mode(profile)
    return Plan(mode) if mode in ("off", "emulate") else Plan("native")


def below_min_validation(plan: Plan, minimum: float, passed: int, total: int) -> Plan:
    """`plan`, or tools off: --min-validation is `minimum` and the model's recorded
    validation passed `passed` of `total` checks."""
    if plan.tools == "off" or passed / total >= minimum:
        return plan
    return Plan("off", below_min_validation=True)


def next_plan(plan: Plan, refusal: Refusal | None, profile: Profile, attempt: int) -> Plan | None:
    """The next rung after `plan` was refused, or None to pass the answer through.

    `attempt` is the 0-based index of the attempt that just failed, so at most
    MAX_RETRIES retries follow the first attempt.
    """
    if refusal is None or attempt >= MAX_RETRIES or not _may_step_down(profile):
        return None
    if plan.tools != "native":
        return None  # off/emulate send no tools: a refusal here is not ours to fix
    if refusal.kind == "tool_choice" and not plan.drop_tool_choice:
        return Plan("native", drop_tool_choice=True)
    return Plan(profile.fallback)


def _may_step_down(profile: Profile) -> bool:
    # A learned tool mode (e.g. "native" from a probe) was the proxy's guess, so a
    # refusal may still correct it; a person's explicit "native" is never overruled.
    return profile.tools == "auto" or profile.sources.get("tools") == "learned"


def rung_name(plan: Plan) -> str:
    """The rung's name for the x-toolshim-retry header and logs."""
    if plan.tools == "native" and plan.drop_tool_choice:
        return "native-no-tool-choice"
    if plan.below_min_validation:
        return "off-min-validation"
    return plan.tools
