"""The server-tool loop's policy, pure: when to stop and what the model sees next.

The flow drives it between upstream turns: an assistant turn whose calls
include server tools -> run them -> append the assistant turn and the `tool`
results -> ask again, until a turn has no server-tool call. This module
decides each step; it does no I/O and keeps no clock of its own.

A turn that mixes client and server calls ends the loop: the client gets its
calls (it must run them before the model can go on), and the server calls of
that turn are run and kept aside, keyed by the client call ids, so that when
the client sends that turn back in its history the server calls and their
results are put back where they were. The client never sees them; the model
never loses them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from proxy.server_tools.runner import ToolOutcome

Message = dict[str, Any]
Call = dict[str, Any]


@dataclass
class LoopGuard:
    """Stops the loop at max_iterations, on a repeated identical call, or past the deadline."""

    max_iterations: int
    deadline: float
    """monotonic seconds."""
    iterations: int = 0
    seen: set[tuple[str, str]] = field(default_factory=set)

    def stop_reason(self, calls: Sequence[Call], now: float) -> str | None:
        if self.iterations >= self.max_iterations:
            return (f"toolshim stopped the server tools after {self.iterations} rounds "
                    "(max_iterations)")
        if now > self.deadline:
            return "toolshim stopped the server tools: they ran past the time budget"
        keys = [_identity(call) for call in calls]
        for key in keys:
            if key in self.seen:
                return (f"toolshim stopped the server tools: the model repeated the same "
                        f"call to {key[0]}")
        self.seen.update(keys)
        self.iterations += 1
        return None


def _identity(call: Call) -> tuple[str, str]:
    function = call.get("function") or {}
    raw = function.get("arguments")
    try:
        canonical = orjson.dumps(orjson.loads(raw) if isinstance(raw, str) else raw,
                                 option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONDecodeError, TypeError):
        canonical = str(raw)
    return str(function.get("name", "")), canonical


@dataclass(frozen=True)
class TurnPlan:
    """Which of a turn's server calls run: identical ones once, at most `cap` distinct."""

    run: list[Call]
    slots: list[int | None]
    """per call of the turn: its index in `run`, or None past the cap."""
    cap: int


def plan_calls(calls: Sequence[Call], cap: int) -> TurnPlan:
    """Identical calls (same name, same canonical arguments) share one run; the
    distinct calls past `cap` do not run (a model can emit hundreds in one turn)."""
    run: list[Call] = []
    first: dict[tuple[str, str], int] = {}
    slots: list[int | None] = []
    for call in calls:
        key = _identity(call)
        if key not in first and len(run) < cap:
            first[key] = len(run)
            run.append(call)
        slots.append(first.get(key))
    return TurnPlan(run, slots, cap)


def spread(plan: TurnPlan, calls: Sequence[Call],
           outcomes: Sequence[ToolOutcome]) -> list[ToolOutcome]:
    """One outcome per call of the turn, each under its own call id."""
    out: list[ToolOutcome] = []
    for call, slot in zip(calls, plan.slots, strict=True):
        call_id = str(call.get("id", ""))
        if slot is None:
            name = str((call.get("function") or {}).get("name", ""))
            error = (f"not run: toolshim runs at most {plan.cap} distinct server-tool "
                     "calls per turn (max_server_tool_calls)")
            out.append(ToolOutcome(call_id, name, False,
                                   orjson.dumps({"error": error}).decode(), 0.0, error))
        else:
            out.append(replace(outcomes[slot], call_id=call_id))
    return out


def split_calls(calls: Sequence[Call], server_names: set[str]) -> tuple[list[Call], list[Call]]:
    """(server calls, client calls) of one assistant turn, each in order."""
    server = [c for c in calls if (c.get("function") or {}).get("name") in server_names]
    client = [c for c in calls if (c.get("function") or {}).get("name") not in server_names]
    return server, client


def next_messages(messages: Sequence[Message], content: str | None,
                  calls: Sequence[Call], outcomes: Sequence[ToolOutcome]) -> list[Message]:
    """The conversation with the assistant's server-tool turn and its results appended."""
    turn: Message = {"role": "assistant", "content": content or "", "tool_calls": list(calls)}
    results = [{"role": "tool", "tool_call_id": o.call_id, "content": o.content}
               for o in outcomes]
    return [*messages, turn, *results]


@dataclass(frozen=True)
class SetAside:
    """Server calls of a mixed turn, to put back when the client returns that turn."""

    calls: tuple[Call, ...]
    results: tuple[Message, ...]


def set_aside(calls: Sequence[Call], outcomes: Sequence[ToolOutcome]) -> SetAside:
    return SetAside(tuple(calls), tuple({"role": "tool", "tool_call_id": o.call_id,
                                         "content": o.content} for o in outcomes))


def put_back(messages: Sequence[Message], kept: Mapping[str, SetAside]) -> list[Message]:
    """History with set-aside server calls restored after the assistant turns they belong to.

    kept maps a client call id to what was set aside with it; a turn is
    matched by any of its call ids, and each set-aside part is used once.
    """
    if not kept:
        return list(messages)
    out: list[Message] = []
    used: set[int] = set()
    pending: list[Message] = []
    for message in messages:
        if pending and message.get("role") != "tool":
            out.extend(pending)
            pending = []
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        part = _match(calls, kept, used) if isinstance(calls, list) else None
        if part is None:
            out.append(message)
            continue
        out.append({**message, "tool_calls": [*part.calls, *calls]})  # type: ignore[misc]
        pending = list(part.results)
    out.extend(pending)
    return out


def _match(calls: list[Any], kept: Mapping[str, SetAside], used: set[int]) -> SetAside | None:
    for call in calls:
        part = kept.get(str(call.get("id", ""))) if isinstance(call, dict) else None
        if part is not None and id(part) not in used:
            used.add(id(part))
            return part
    return None
