"""Tool renames on the way up, and the reverse map for the way back."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy.transforms.request.rename import apply_rename, reverse_rename
from proxy.types import Plan, Profile

PROFILE = Profile("m", rename=(("str_replace_based_edit_tool", "edit"), ("Bash", "bash")))


def conversation() -> dict[str, Any]:
    return {
        "model": "m",
        "tools": [
            {"type": "function", "function": {"name": "Bash", "parameters": {}}},
            {"type": "function", "function": {"name": "grep"}},
        ],
        "tool_choice": {"type": "function", "function": {"name": "Bash"}},
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}},
                {"id": "2", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "1", "name": "Bash", "content": "x"},
            {"role": "assistant", "function_call": {"name": "str_replace_based_edit_tool"}},
        ],
    }


def test_renames_everywhere_names_travel() -> None:
    req = conversation()
    before = copy.deepcopy(req)
    out, obs = apply_rename(req, PROFILE, Plan())
    assert req == before and obs == []
    assert [t["function"]["name"] for t in out["tools"]] == ["bash", "grep"]
    assert out["tool_choice"]["function"]["name"] == "bash"
    calls = out["messages"][1]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["bash", "grep"]
    assert calls[0]["id"] == "1" and calls[0]["function"]["arguments"] == "{}"
    assert out["messages"][2]["name"] == "bash"
    assert out["messages"][3]["function_call"]["name"] == "edit"
    assert out["messages"][0] is req["messages"][0]  # untouched messages are shared


def test_no_renames_is_identity() -> None:
    req = conversation()
    out, _ = apply_rename(req, Profile("m"), Plan())
    assert out is req


def test_string_tool_choice_untouched() -> None:
    out, _ = apply_rename({"tool_choice": "auto", "messages": []}, PROFILE, Plan())
    assert out["tool_choice"] == "auto"


def test_reverse_rename() -> None:
    assert reverse_rename(PROFILE) == {"edit": "str_replace_based_edit_tool", "bash": "Bash"}


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.text(min_size=1, max_size=5)))
def test_reverse_undoes_rename_for_injective_maps(pairs: dict[str, str]) -> None:
    if len(set(pairs.values())) != len(pairs):
        return
    profile = Profile("m", rename=tuple(pairs.items()))
    tools = [{"type": "function", "function": {"name": n}} for n in pairs]
    out, _ = apply_rename({"tools": tools, "messages": []}, profile, Plan())
    back = reverse_rename(profile)
    assert [back[t["function"]["name"]] for t in out["tools"]] == list(pairs)
