from __future__ import annotations

import dataclasses
from typing import Any

from proxy.transforms.request import apply_request_steps
from proxy.transforms.request.backend_quirks import REQUIRED_NOTE
from proxy.types import Plan, Profile

ONE: Any = [{"type": "function", "function": {"name": "get_weather"}}]
TWO: Any = [*ONE, {"type": "function", "function": {"name": "get_time"}}]
ASK: Any = [{"role": "user", "content": "hi"}]
TURN: Any = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}
LLAMA = Profile("m", stream_tools=False, required_tool_choice="rewrite", null_content=False)


def _run(request: dict[str, Any], profile: Profile = LLAMA, plan: Plan | None = None
         ) -> dict[str, Any]:
    original = repr(request)
    out, _ = apply_request_steps(request, profile, plan or Plan())
    assert repr(request) == original  # never mutated
    return out


def test_tools_without_choice_get_auto_unless_told_otherwise() -> None:
    assert _run({"model": "m", "messages": ASK, "tools": ONE})["tool_choice"] == "auto"
    none = dataclasses.replace(LLAMA, implicit_tool_choice=None)
    assert "tool_choice" not in _run({"model": "m", "messages": ASK, "tools": ONE}, none)
    assert "tool_choice" not in _run({"model": "m", "messages": ASK})
    refused = Plan("native", drop_tool_choice=True)
    assert "tool_choice" not in _run({"model": "m", "messages": ASK, "tools": ONE}, plan=refused)


def test_required_names_the_only_tool_after_rename() -> None:
    renamed = dataclasses.replace(LLAMA, rename=(("get_weather", "weather"),))
    out = _run({"model": "m", "messages": ASK, "tools": ONE, "tool_choice": "required"},
               renamed)
    assert out["tool_choice"] == {"type": "function", "function": {"name": "weather"}}


def test_required_with_several_tools_is_auto_and_a_note() -> None:
    system: Any = [{"role": "system", "content": "Be brief."}, *ASK]
    out = _run({"model": "m", "messages": system, "tools": TWO, "tool_choice": "required"})
    assert out["tool_choice"] == "auto"
    assert out["messages"][0] == {"role": "system", "content": f"Be brief.\n\n{REQUIRED_NOTE}"}
    bare = _run({"model": "m", "messages": ASK, "tools": TWO, "tool_choice": "required"})
    assert bare["messages"][0] == {"role": "system", "content": REQUIRED_NOTE}


def test_required_passes_by_default() -> None:
    out = _run({"model": "m", "messages": ASK, "tools": ONE, "tool_choice": "required"},
               Profile("m"))
    assert out["tool_choice"] == "required"


def test_null_content_turns_become_empty_text() -> None:
    messages = [*ASK, TURN, {"role": "tool", "tool_call_id": "1", "content": "18C"}]
    out = _run({"model": "m", "messages": messages, "tools": ONE})
    assert out["messages"][1] == {**TURN, "content": ""}
    assert _run({"model": "m", "messages": messages, "tools": ONE},
                Profile("m"))["messages"][1]["content"] is None


def test_stream_with_tools_is_asked_whole() -> None:
    request = {"model": "m", "messages": ASK, "tools": ONE, "stream": True,
               "stream_options": {"include_usage": True}}
    out = _run(request)
    assert "stream" not in out and "stream_options" not in out
    assert _run({**request, "tools": []})["stream"] is True  # no tools: stream as asked
    assert _run(request, plan=Plan("off"))["stream"] is True  # tools stripped: stream
