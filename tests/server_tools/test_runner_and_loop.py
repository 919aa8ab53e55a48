from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.capabilities.server_tools import BuiltinTool, MockTool
from proxy.server_tools.loop import (
    LoopGuard,
    next_messages,
    plan_calls,
    put_back,
    set_aside,
    split_calls,
    spread,
)
from proxy.server_tools.mcp_servers import McpServers
from proxy.server_tools.runner import ServerTools, ToolOutcome


def _call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


@pytest.fixture
async def tools() -> AsyncIterator[ServerTools]:
    async with httpx.AsyncClient() as http:
        runner = ServerTools({
            "calc": BuiltinTool(kind="builtin", builtin="calculator",
                                description="Evaluate arithmetic."),
            "lookup_order": MockTool(kind="mock", result="shipped", max_result_bytes=64,
                                     description="Order status."),
            "big": MockTool(kind="mock", result="x" * 500, max_result_bytes=100),
        }, McpServers(), http)
        yield runner
        await runner.aclose()


def test_offered_by_names_and_globs(tools: ServerTools) -> None:
    names = [t["function"]["name"] for t in tools.offered(["calc", "lookup_*"])]
    assert names == ["calc", "lookup_order"]
    calc = tools.offered(["calc"])[0]["function"]
    assert calc["parameters"]["required"] == ["expression"]  # the builtin's own schema
    assert tools.offered(["nothing*"]) == []


async def test_run_all_results_errors_and_caps(tools: ServerTools) -> None:
    outcomes = await tools.run_all([
        _call("calc", {"expression": "6*7"}, "a"),
        _call("calc", {"expression": "__import__('os')"}, "b"),
        _call("calc", "{not json", "c"),
        _call("big", {}, "d"),
    ])
    assert [o.call_id for o in outcomes] == ["a", "b", "c", "d"]
    assert outcomes[0].ok and outcomes[0].content == "42"
    assert not outcomes[1].ok and "only the listed" in json.loads(outcomes[1].content)["error"]
    assert json.loads(outcomes[2].content) == {"error": "the arguments are not valid JSON"}
    assert outcomes[3].content.startswith("x" * 100) and "truncated" in outcomes[3].content


def test_guard_stops_on_iterations_repeats_and_deadline() -> None:
    guard = LoopGuard(max_iterations=2, deadline=100.0)
    assert guard.stop_reason([_call("calc", {"expression": "1"})], now=1) is None
    reason = guard.stop_reason([_call("calc", '{"expression":  "1"}', "other-id")], now=2)
    assert reason is not None and "repeated the same call to calc" in reason
    guard = LoopGuard(max_iterations=1, deadline=100.0)
    assert guard.stop_reason([_call("calc", {"expression": "1"})], now=1) is None
    assert "max_iterations" in (guard.stop_reason([_call("calc", {"expression": "2"})], 2) or "")
    late = LoopGuard(max_iterations=5, deadline=10.0)
    assert "time budget" in (late.stop_reason([_call("calc", {})], now=11) or "")


def test_split_and_next_messages() -> None:
    calls = [_call("calc", {}, "s1"), _call("get_weather", {}, "c1")]
    server, client = split_calls(calls, {"calc"})
    assert [c["id"] for c in server] == ["s1"] and [c["id"] for c in client] == ["c1"]
    outcome = ToolOutcome("s1", "calc", True, "42", 1.0)
    history = next_messages([{"role": "user", "content": "hi"}], None, server, [outcome])
    assert history[1] == {"role": "assistant", "content": "", "tool_calls": server}
    assert history[2] == {"role": "tool", "tool_call_id": "s1", "content": "42"}


def test_put_back_restores_set_aside_server_calls() -> None:
    server_call, client_call = _call("calc", {}, "s1"), _call("get_weather", {}, "c1")
    kept = {"c1": set_aside([server_call], [ToolOutcome("s1", "calc", True, "42", 1.0)])}
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [client_call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "user", "content": "thanks"},
    ]
    restored = put_back(history, kept)
    assert restored[1]["tool_calls"] == [server_call, client_call]
    assert restored[2:5] == [history[2], {"role": "tool", "tool_call_id": "s1", "content": "42"},
                             history[3]]
    assert put_back(history, {}) == history


@given(st.lists(st.sampled_from(["user", "assistant", "tool"]), max_size=12))
def test_put_back_without_matches_changes_nothing(roles: list[str]) -> None:
    history = [{"role": role, "content": str(i)} for i, role in enumerate(roles)]
    kept = {"zz": set_aside([_call("calc", {}, "s9")], [])}
    assert put_back(history, kept) == history


def test_plan_runs_identical_calls_once_and_caps_the_distinct_ones() -> None:
    calls = [_call("calc", {"a": 1, "b": 2}, "x"), _call("calc", '{"b":2,"a":1}', "y"),
             _call("calc", {"a": 2}, "z"), _call("echo", {"a": 1, "b": 2}, "w")]
    plan = plan_calls(calls, 2)
    assert [c["id"] for c in plan.run] == ["x", "z"]
    assert plan.slots == [0, 0, 1, None]
    ran = [ToolOutcome("x", "calc", True, "one", 1.0), ToolOutcome("z", "calc", True, "two", 1.0)]
    out = spread(plan, calls, ran)
    assert [(o.call_id, o.content) for o in out[:3]] == [("x", "one"), ("y", "one"), ("z", "two")]
    assert out[3].call_id == "w" and not out[3].ok and "max_server_tool_calls" in out[3].content
