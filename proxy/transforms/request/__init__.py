"""The per-model request rewrites, in the one order they run.

Each step maps (request, profile, plan) to a new request plus observations,
never mutating its input; each decides by itself whether it applies. The
order matters: tools are selected before they are renamed and their schemas
rewritten, so emulation describes exactly what the model may call, and the
system prompt edits run last so they see the notes the tool modes add.
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.transforms.request.backend_quirks import (
    fill_null_content,
    fill_tool_choice,
    rewrite_required,
    unstream_tools,
)
from proxy.transforms.request.choice import apply_choice
from proxy.transforms.request.emulate import emulate_tools
from proxy.transforms.request.off import strip_tools_off
from proxy.transforms.request.rename import apply_rename
from proxy.transforms.request.schema import rewrite_schemas
from proxy.transforms.request.system import apply_system_prompt, move_system_to_user
from proxy.transforms.request.tools import select_tools
from proxy.types import ChatRequest, Observation, Plan, Profile

Step = Callable[[ChatRequest, Profile, Plan], tuple[ChatRequest, list[Observation]]]

REQUEST_STEPS: tuple[Step, ...] = (
    select_tools,
    fill_tool_choice,
    apply_choice,
    rewrite_required,
    apply_rename,
    rewrite_schemas,
    strip_tools_off,
    emulate_tools,
    apply_system_prompt,
    move_system_to_user,
    fill_null_content,
    unstream_tools,
)


def apply_request_steps(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """Run every step of REQUEST_STEPS in order; collect their observations."""
    observations: list[Observation] = []
    for step in REQUEST_STEPS:
        request, found = step(request, profile, plan)
        observations.extend(found)
    return request, observations
