"""off mode: tool fields stripped, tool turns as text, the system note."""

from __future__ import annotations

import copy
from typing import Any

from proxy.transforms.request.off import OFF_NOTE, strip_tools_off
from proxy.types import Plan, Profile

OFF = Plan(tools="off")
PROFILE = Profile("m")


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def agent_request() -> dict[str, Any]:
    return {
        "model": "m",
        "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "functions": [{"name": "legacy"}],
        "function_call": "auto",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Tokyo and Paris?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                call("call_1", "get_weather", '{"city":"Tokyo"}'),
                call("call_2", "get_weather", '{"city": "Paris"}'),
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2",
             "content": [{"type": "text", "text": "rain"}, {"type": "image_url"}]},
        ],
    }


def test_off_flattens_agent_history() -> None:
    req = agent_request()
    before = copy.deepcopy(req)
    out, obs = strip_tools_off(req, PROFILE, OFF)
    assert req == before
    assert [(o.kind, o.detail["count"], o.detail["reason"]) for o in obs] == [
        ("tools_stripped", len(req["tools"]), "off")]
    assert out == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief.\n\n" + OFF_NOTE},
            {"role": "user", "content": "Weather in Tokyo and Paris?"},
            {"role": "assistant", "content": "Checking.\n\n"
             '[called get_weather({"city": "Tokyo"})]\n[called get_weather({"city": "Paris"})]'},
            {"role": "user", "content": "[result of get_weather (call_1)]: sunny\n\n"
             "[result of get_weather (call_2)]: rain"},
        ],
    }


def test_result_merges_into_preceding_converted_turn_only() -> None:
    req = {"messages": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": None, "tool_calls": [call("1", "f", "not json")]},
        {"role": "assistant", "content": "more"},
        {"role": "tool", "tool_call_id": "1", "name": "f", "content": "r"},
        {"role": "user", "content": [{"type": "text", "text": "next"}, {"type": "image_url"}]},
    ]}
    out, _ = strip_tools_off(req, PROFILE, OFF)
    assert out["messages"] == [
        {"role": "system", "content": OFF_NOTE},
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "[called f(not json)]\n\nmore"},
        {"role": "user", "content": [{"type": "text", "text": "[result of f (1)]: r"},
                                     {"type": "text", "text": "next"}, {"type": "image_url"}]},
    ]


def test_legacy_function_call_history() -> None:
    req = {"messages": [
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "done"},
    ]}
    out, _ = strip_tools_off(req, PROFILE, OFF)
    assert out["messages"][1:] == [
        {"role": "assistant", "content": "[called f({})]"},
        {"role": "user", "content": "[result of f]: done"},
    ]


def test_plain_chat_gets_no_note_and_other_plans_are_untouched() -> None:
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "none"}
    out, _ = strip_tools_off(req, PROFILE, OFF)
    assert out == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    agent = agent_request()
    assert strip_tools_off(agent, PROFILE, Plan(tools="native"))[0] is agent
