"""What to tell a model whose tool calls failed the checks, so it can fix them itself.

Under `invalid_tool_calls: correct` the flow asks the model once more (at
most `max_corrections` times) inside the same client request. This module
builds that follow-up, pure: the conversation as the client sent it, the
model's reply (its text only: the broken calls are described, not replayed,
since a backend may refuse a history that names an unknown tool or carries
arguments that are not JSON), and a user message that says precisely what
was wrong and what would be right. Must not: do I/O, or put anything in
front of the client (correction turns never reach its history).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.types import JSON

_MAX_ARGUMENTS_SHOWN = 600
_MAX_SCHEMA_SHOWN = 2_000


@dataclass(frozen=True)
class Rejected:
    """A call the checks refused: its name, its raw arguments and the check's reason.

    reason is the checks' own: "unknown_tool", "bad_json", "not_an_object",
    "schema: <path>: <message>", or "truncated" for a call cut off mid-way.
    """

    name: str
    arguments: str
    reason: str


@dataclass(frozen=True)
class Problem:
    """Why a correction is asked for: rejected calls, or a call missing or forbidden."""

    rejected: tuple[Rejected, ...] = ()
    missing_call: str | None = None
    """tool_choice said a call was required ("required" or a function's name) and none came."""
    forbidden_calls: tuple[str, ...] = ()
    """names called although tool_choice was "none"."""


def correction_messages(
    messages: Sequence[Mapping[str, Any]], reply: str | None, problem: Problem,
    offered: Mapping[str, JSON],
) -> list[dict[str, Any]]:
    """The conversation to send for a correction: history, the model's reply, what was wrong."""
    return [
        *(dict(m) for m in messages),
        {"role": "assistant", "content": reply or ""},
        {"role": "user", "content": describe(problem, offered)},
    ]


def describe(problem: Problem, offered: Mapping[str, JSON]) -> str:
    names = ", ".join(sorted(offered)) or "(none)"
    lines = ["Your previous reply could not be used:"]
    for call in problem.rejected:
        lines.extend(_one(call, offered, names))
    if problem.forbidden_calls:
        lines.append(f"- You called {_list(problem.forbidden_calls)}, but no tool may be "
                     "called for this reply. Answer in text instead.")
        return "\n".join(lines)
    if problem.missing_call == "required":
        lines.append(f"- A tool call is required here and you made none. Call one of: {names}.")
    elif problem.missing_call:
        lines.append(f"- You must call `{problem.missing_call}` here and you did not.")
        lines.extend(_schema_lines(problem.missing_call, offered))
    lines.append("Reply again with the corrected tool call(s), complete and in the tools' "
                 "own format. Do not apologise or explain.")
    return "\n".join(lines)


def _one(call: Rejected, offered: Mapping[str, JSON], names: str) -> list[str]:
    shown = _clip(call.arguments, _MAX_ARGUMENTS_SHOWN)
    if call.reason == "unknown_tool":
        meant = difflib.get_close_matches(call.name, list(offered), n=1, cutoff=0.6)
        out = [f"- You called `{call.name}`, which does not exist. "
               + f"The available tools are: {names}."]
        if meant:
            out.append(f"  Did you mean `{meant[0]}`?")
            out.extend(_schema_lines(meant[0], offered))
        return out
    if call.reason == "truncated":
        return [f"- Your call to `{call.name}` was cut off before it ended: {shown}",
                "  Send the whole call again, with every bracket closed."]
    if call.reason in ("bad_json", "not_an_object"):
        what = "are not valid JSON" if call.reason == "bad_json" else "are not a JSON object"
        return [f"- The arguments of your call to `{call.name}` {what}: {shown}",
                "  Arguments must be one JSON object with the parameters as keys.",
                *_schema_lines(call.name, offered)]
    detail = call.reason.removeprefix("schema: ")
    return [f"- Your call to `{call.name}` does not match its parameters: {detail}",
            f"  You sent: {shown}", *_schema_lines(call.name, offered)]


def _schema_lines(name: str, offered: Mapping[str, JSON]) -> list[str]:
    if name not in offered:
        return []
    schema = orjson.dumps(offered[name]).decode()
    return [f"  The parameters of `{name}` are: {_clip(schema, _MAX_SCHEMA_SHOWN)}"]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _list(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)
