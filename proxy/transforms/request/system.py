"""System prompt edits and system text for models without a system role.

Owns `profile.system_prompt` (prepend / append / replace on the first system
message) and `system_role: false` (system text moved into the first user
turn). Must not touch tool fields or non-system history.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.transforms.request.content import add_text, content_text, join_contents
from proxy.types import ChatRequest, Message, Observation, Plan, Profile

SYSTEM_ROLES = ("system", "developer")
"""Newer OpenAI clients send "developer" where older ones send "system"."""


def _first_system(messages: Sequence[Message]) -> int | None:
    for i, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") in SYSTEM_ROLES:
            return i
    return None


def add_system_text(messages: Sequence[Message], text: str) -> list[Message]:
    """`messages` with `text` appended to the first system message (or a new one)."""
    out = list(messages)
    index = _first_system(out)
    if index is None:
        return [{"role": "system", "content": text}, *out]
    message = out[index]
    out[index] = {**message, "content": add_text(message.get("content"), text, "end")}
    return out


def apply_system_prompt(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """Apply profile.system_prompt's replace, then prepend and append."""
    edit = profile.system_prompt
    if edit.replace is None and edit.prepend is None and edit.append is None:
        return request, []
    messages = list(request.get("messages") or [])
    index = _first_system(messages)
    if index is None:
        messages.insert(0, {"role": "system", "content": ""})
        index = 0
    content = messages[index].get("content")
    if edit.replace is not None:
        content = edit.replace
    if edit.prepend:
        content = add_text(content, edit.prepend, "start")
    if edit.append:
        content = add_text(content, edit.append, "end")
    messages[index] = {**messages[index], "content": content}
    return {**request, "messages": messages}, []


def move_system_to_user(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """For models without a system role: system text opens the first user turn.

    Templates such as Gemma's raise on a system message; the text still
    reaches the model at the start of the conversation.
    """
    messages = request.get("messages")
    if profile.system_role or not isinstance(messages, list):
        return request, []
    system = [m for m in messages if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES]
    if not system:
        return request, []
    text = "\n\n".join(t for t in (content_text(m.get("content")) for m in system) if t)
    rest = [m for m in messages if not any(m is s for s in system)]
    if not text:
        return {**request, "messages": rest}, []
    for i, message in enumerate(rest):
        if isinstance(message, dict) and message.get("role") == "user":
            content = join_contents(text, message.get("content"))
            rest[i] = {**message, "content": content}
            break
    else:
        rest.insert(0, {"role": "user", "content": text})
    return {**request, "messages": rest}, []
