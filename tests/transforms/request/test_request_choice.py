"""tool_choice / parallel_tool_calls dropping per profile and plan."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.transforms.request.choice import apply_choice, choice_kind
from proxy.types import Plan, Profile

NAMED = {"type": "function", "function": {"name": "ls"}}


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [], "tools": [{"type": "function"}], **extra}


@pytest.mark.parametrize(
    ("choice", "kind"),
    [("none", "none"), ("auto", "auto"), ("required", "required"), (NAMED, "function"),
     ({"type": "allowed_tools"}, "allowed_tools"), (3, None)],
)
def test_choice_kind(choice: Any, kind: str | None) -> None:
    assert choice_kind(choice) == kind


@pytest.mark.parametrize("choice", ["required", NAMED])
def test_profile_kind_is_dropped(choice: Any) -> None:
    req = body(tool_choice=choice)
    before = copy.deepcopy(req)
    out, obs = apply_choice(req, Profile("m", drop_tool_choice=("required", "function")), Plan())
    assert "tool_choice" not in out and obs == []
    assert req == before


def test_other_kinds_stay() -> None:
    req = body(tool_choice="auto")
    out, _ = apply_choice(req, Profile("m", drop_tool_choice=("required",)), Plan())
    assert out is req


def test_plan_drops_any_choice() -> None:
    out, _ = apply_choice(body(tool_choice="auto"), Profile("m"), Plan(drop_tool_choice=True))
    assert "tool_choice" not in out


@pytest.mark.parametrize(("capable", "kept"), [(False, False), (True, True), (None, True)])
def test_parallel_tool_calls(capable: bool | None, kept: bool) -> None:
    req = body(parallel_tool_calls=True)
    out, _ = apply_choice(req, Profile("m", parallel_tool_calls=capable), Plan())
    assert ("parallel_tool_calls" in out) is kept
    assert req["parallel_tool_calls"] is True
