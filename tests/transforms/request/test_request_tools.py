"""Tool selection: allow/deny globs, max_tools budget, tool_choice follow-up."""

from __future__ import annotations

import copy
from fnmatch import fnmatchcase
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy.transforms.request.history import called_names
from proxy.transforms.request.tools import select_tools
from proxy.types import Observation, Plan, Profile

NATIVE = Plan(tools="native")


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def request(*names: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [tool(n) for n in names],
    }
    body.update(extra)
    return body


def names(req: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in req.get("tools", [])]


def run(req: dict[str, Any], profile: Profile, plan: Plan = NATIVE) -> Any:
    before = copy.deepcopy(req)
    out = select_tools(req, profile, plan)
    assert req == before
    return out


def test_deny_removes_names_and_globs() -> None:
    profile = Profile("m", deny_tools=("read_*", "bash"))
    out, obs = run(request("read_file", "bash", "grep", "read_dir"), profile)
    assert names(out) == ["grep"]
    assert obs == [
        Observation("m", "tools_stripped",
                    {"count": 3, "names": ["read_file", "bash", "read_dir"], "reason": "deny"})
    ]


def test_allow_keeps_only_matching() -> None:
    profile = Profile("m", allow_tools=("git_*", "ls"))
    out, obs = run(request("git_log", "ls", "rm", "git_diff"), profile)
    assert names(out) == ["git_log", "ls", "git_diff"]
    assert obs[0].detail["reason"] == "allow"
    assert obs[0].detail["names"] == ["rm"]


def test_globs_are_case_sensitive() -> None:
    out, _ = run(request("Bash", "bash"), Profile("m", deny_tools=("bash",)))
    assert names(out) == ["Bash"]


def test_max_tools_keeps_called_tools_first_in_client_order() -> None:
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "e", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    req = request("a", "b", "c", "d", "e", messages=history)
    out, obs = run(req, Profile("m", max_tools=3))
    assert names(out) == ["a", "b", "e"]
    assert obs[0].detail == {"count": 2, "names": ["c", "d"], "reason": "max_tools"}


def test_max_tools_none_is_unlimited_and_untouched_request_is_same_object() -> None:
    req = request(*[f"t{i}" for i in range(100)])
    out, obs = run(req, Profile("m", max_tools=None))
    assert out is req and obs == []


def test_no_tools_left_removes_tool_fields() -> None:
    req = request("a", tool_choice="required", parallel_tool_calls=True)
    out, _ = run(req, Profile("m", max_tools=0))
    assert "tools" not in out and "tool_choice" not in out
    assert "parallel_tool_calls" not in out


def test_empty_client_tools_list_is_removed() -> None:
    out, obs = run(request(tool_choice="auto"), Profile("m"))
    assert "tools" not in out and "tool_choice" not in out and obs == []


def test_named_choice_of_removed_tool_is_dropped() -> None:
    choice = {"type": "function", "function": {"name": "rm"}}
    out, obs = run(request("ls", "rm", tool_choice=choice), Profile("m", deny_tools=("rm",)))
    assert "tool_choice" not in out
    assert Observation("m", "tool_choice_dropped", {"name": "rm", "reason": "tool_removed"}) in obs


def test_named_choice_of_kept_tool_stays() -> None:
    choice = {"type": "function", "function": {"name": "ls"}}
    out, _ = run(request("ls", "rm", tool_choice=choice), Profile("m", deny_tools=("rm",)))
    assert out["tool_choice"] == choice


def test_off_plan_leaves_request_alone() -> None:
    req = request("a", "b")
    out, obs = run(req, Profile("m", max_tools=0), Plan(tools="off"))
    assert out is req and obs == []


def test_called_names_reads_tool_calls_and_legacy_function_call() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "function_call": {"name": "old", "arguments": "{}"}},
        {"role": "assistant", "tool_calls": [{"function": {"name": "new"}}]},
        {"role": "user", "tool_calls": [{"function": {"name": "ignored"}}]},
    ]
    assert called_names(messages) == ["old", "new"]


tool_names = st.text("abcdef_*", min_size=1, max_size=4)


@given(
    st.lists(tool_names, max_size=12),
    st.lists(tool_names, max_size=3),
    st.none() | st.integers(0, 10),
    st.lists(tool_names, max_size=4),
)
def test_deny_and_budget_hold_for_any_request(
    client: list[str], deny: list[str], max_tools: int | None, used: list[str]
) -> None:
    history = [{"role": "assistant", "tool_calls": [{"function": {"name": n}} for n in used]}]
    req = request(*client, messages=history, tool_choice="auto")
    out, _ = run(req, Profile("m", deny_tools=tuple(deny), max_tools=max_tools))
    kept = names(out)
    assert not set(kept) & set(deny)
    if max_tools is not None:
        assert len(kept) <= max_tools
    rest = iter(client)
    assert all(name in rest for name in kept)  # a subsequence: the client's order
    assert not any(fnmatchcase(n, p) for n in kept for p in deny)
    if not kept:
        assert "tools" not in out and "tool_choice" not in out


def test_choice_without_tools_is_removed() -> None:
    req = {"model": "m", "messages": [], "tool_choice": "auto", "parallel_tool_calls": False}
    out, _ = run(req, Profile("m"))
    assert out == {"model": "m", "messages": []}
