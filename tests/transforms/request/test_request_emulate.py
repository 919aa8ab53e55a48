"""emulate mode: tools described in the system prompt, history in the format."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from proxy.formats.base import ParsedCall, ParseResult
from proxy.transforms.request import apply_request_steps
from proxy.transforms.request.emulate import emulate_tools, emulate_with
from proxy.types import JSON, Plan, Profile, SchemaRewrite, ToolDef

EMULATE = Plan(tools="emulate")


class FakeFormat:
    """Renders so a test can see exactly what emulate handed it."""

    name: str = "fake"
    markers: tuple[str, ...] = ("CALL",)

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return "TOOLS " + json.dumps(tools, sort_keys=True)

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(f"CALL {c.name} {json.dumps(c.arguments)}" for c in calls)

    def render_result(self, name: str, content: str) -> str:
        return f"RESULT {name}: {content}"

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        return ParseResult((), text)


def weather_tool(name: str = "get_weather") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "additionalProperties": False,
        "properties": {"city": {"type": "string"}}}}}


def agent_request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "tools": [weather_tool()],
        "parallel_tool_calls": True,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Tokyo?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'}},
                {"id": "c2", "type": "function",
                 "function": {"name": "get_weather", "arguments": "oops"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "c2", "content": "error"},
        ],
        **extra,
    }


def test_emulate_with_fake_format() -> None:
    req = agent_request()
    before = copy.deepcopy(req)
    out = emulate_with(req, FakeFormat())
    assert req == before
    tools_text = "TOOLS " + json.dumps([weather_tool()], sort_keys=True)
    assert out == {"model": "m", "messages": [
        {"role": "system", "content": f"Be brief.\n\n{tools_text}"},
        {"role": "user", "content": "Tokyo?"},
        {"role": "assistant", "content":
         'CALL get_weather {"city": "Tokyo"}\nCALL get_weather {"arguments": "oops"}'},
        {"role": "user", "content": "RESULT get_weather: sunny\n\nRESULT get_weather: error"},
    ]}


@pytest.mark.parametrize(("extra", "note"), [
    ({"tool_choice": "required"}, "You must call at least one tool in your reply."),
    ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
     "You must call the tool get_weather in your reply."),
    ({"parallel_tool_calls": False}, "Call at most one tool per reply."),
])
def test_choice_becomes_an_instruction(extra: dict[str, Any], note: str) -> None:
    out = emulate_with(agent_request(**extra), FakeFormat())
    assert out["messages"][0]["content"].endswith(f"\n\n{note}")
    assert "tool_choice" not in out and "parallel_tool_calls" not in out


def test_choice_none_describes_no_tools_but_renders_history() -> None:
    out = emulate_with(agent_request(tool_choice="none"), FakeFormat())
    assert out["messages"][0] == {"role": "system", "content": "Be brief."}
    assert out["messages"][2]["content"].startswith("CALL get_weather")


def test_legacy_functions_are_described() -> None:
    req = {"model": "m", "messages": [{"role": "user", "content": "q"}],
           "functions": [{"name": "f"}], "function_call": "auto"}
    out = emulate_with(req, FakeFormat())
    assert out["messages"][0]["content"] == "TOOLS " + json.dumps(
        [{"type": "function", "function": {"name": "f"}}], sort_keys=True)
    assert "functions" not in out and "function_call" not in out


def test_plain_chat_is_left_alone() -> None:
    req = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    assert emulate_with(req, FakeFormat()) == req
    assert emulate_tools(req, Profile("m"), Plan())[0] is req


def test_default_hermes_format_through_the_pipeline() -> None:
    profile = Profile("m", rename=(("get_weather", "weather"),), deny_tools=("rm",),
                      schema=SchemaRewrite(drop_keywords=("additionalProperties",)))
    req = agent_request()
    req["tools"].append(weather_tool("rm"))
    out, observations = apply_request_steps(req, profile, EMULATE)
    assert [o.kind for o in observations] == ["tools_stripped", "tools_emulated"]
    added = sum(len(m["content"]) for m in out["messages"] if isinstance(m["content"], str)) \
        - sum(len(m["content"]) for m in req["messages"] if isinstance(m.get("content"), str))
    assert observations[1].detail == {"format": "hermes", "chars": added}
    assert "tools" not in out and all(m["role"] != "tool" for m in out["messages"])
    system = out["messages"][0]["content"]
    assert system.startswith("Be brief.\n\n")
    assert '"weather"' in system and '"rm"' not in system
    assert "additionalProperties" not in system and "get_weather" not in system
    assistant = out["messages"][2]["content"]
    assert assistant.count("<tool_call>") == 2 and '"weather"' in assistant
    assert out["messages"][3]["content"].count("<tool_response>") == 2


def test_unknown_format_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown tool format"):
        emulate_tools(agent_request(), Profile("m", tool_format="nope"), EMULATE)
