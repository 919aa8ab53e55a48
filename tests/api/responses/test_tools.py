"""Codex's own Responses tools (custom, local_shell) <-> chat function tools: the pure
translation both ways, the builder's items and events checked by the openai SDK's own
stream accumulator, and round trips property-tested."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from proxy.api.responses.events import ResponseBuilder
from proxy.api.responses.request import input_messages, split_tools, to_chat
from proxy.api.responses.tools import (
    chat_arguments,
    chat_tool,
    custom_description,
    item_fields,
    kinds,
)
from proxy.errors import ApiError

# The shape Codex CLI 0.171 sends for its apply_patch (a Lark grammar, abridged here).
GRAMMAR = ('start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
           'end_patch: "*** End Patch" LF?\nhunk: add_hunk\n'
           'add_hunk: "*** Add File: " filename LF add_line+\n%import common.LF\n')
APPLY_PATCH: dict[str, Any] = {
    "type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR}}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi \"there\"\n*** End Patch\n"


def test_custom_tool_becomes_a_function_with_one_string_input() -> None:
    tool = chat_tool(APPLY_PATCH)
    function = tool["function"]
    assert tool["type"] == "function" and function["name"] == "apply_patch"
    assert function["parameters"] == {"type": "object", "required": ["input"],
                                      "properties": {"input": {"type": "string"}}}
    assert function["description"].startswith("Edit files with a patch.\n\n")
    assert "lark grammar" in function["description"] and GRAMMAR in function["description"]


def test_text_format_custom_tool_says_free_text() -> None:
    tool = chat_tool({"type": "custom", "name": "note", "format": {"type": "text"}})
    assert "free-form text" in tool["function"]["description"]
    assert "grammar" not in tool["function"]["description"]


def test_a_huge_grammar_is_cut_within_the_budget() -> None:
    big = "".join(f"rule_{i}: \"x{i}\" LF\n" for i in range(5000))
    text = custom_description({**APPLY_PATCH, "format": {
        "type": "grammar", "syntax": "regex", "definition": big}}, budget=2000)
    assert len(text) < 2400 and "regex grammar" in text
    assert "more characters of the grammar left out" in text
    assert "rule_0:" in text and "rule_4999" not in text


def test_local_shell_becomes_a_function_with_a_command_array() -> None:
    function = chat_tool({"type": "local_shell"})["function"]
    assert function["name"] == "local_shell"
    assert function["parameters"]["properties"]["command"]["type"] == "array"
    assert function["parameters"]["required"] == ["command"]


def test_custom_and_local_shell_are_kept_hosted_counted() -> None:
    kept, stripped = split_tools([APPLY_PATCH, {"type": "local_shell"},
                                  {"type": "web_search"}, {"type": "image_generation"}])
    assert [t["type"] for t in kept] == ["custom", "local_shell"] and stripped == 2
    assert kinds(kept) == {"apply_patch": "custom", "local_shell": "local_shell"}


@pytest.mark.parametrize(("tool", "field"), [
    ({"type": "custom"}, "tools.0.name"),
    ({"type": "custom", "name": "x", "format": "lark"}, "tools.0.format"),
    ({"type": "custom", "name": "x", "format": {"type": "grammar"}}, "tools.0.format.definition"),
])
def test_malformed_custom_tool_is_a_400_naming_the_field(tool: Any, field: str) -> None:
    with pytest.raises(ApiError) as err:
        split_tools([tool])
    assert err.value.status == 400 and err.value.param == field


def test_custom_tool_choice_names_the_function() -> None:
    body = {"model": "m", "input": "patch it", "tools": [APPLY_PATCH],
            "tool_choice": {"type": "custom", "name": "apply_patch"}}
    chat = to_chat(body, []).chat
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}


def test_history_items_become_chat_calls_and_tool_messages() -> None:
    messages = input_messages([
        {"role": "user", "content": "make hello.txt"},
        {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch",
         "input": PATCH, "status": "completed"},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Success."},
        {"type": "local_shell_call", "call_id": "call_2", "status": "completed",
         "action": {"type": "exec", "command": ["cat", "hello.txt"], "env": {},
                    "working_directory": "/w", "timeout_ms": 1000}},
        {"type": "local_shell_call_output", "id": "call_2", "output": "hi"}])
    assert messages[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {
            "name": "apply_patch", "arguments": orjson.dumps({"input": PATCH}).decode()}}]}
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "Success."}
    shell = messages[3]["tool_calls"][0]["function"]
    assert shell["name"] == "local_shell" and orjson.loads(shell["arguments"]) == {
        "command": ["cat", "hello.txt"], "workdir": "/w", "timeout_ms": 1000}
    assert messages[4] == {"role": "tool", "tool_call_id": "call_2", "content": "hi"}


def test_custom_call_without_input_is_a_400() -> None:
    with pytest.raises(ApiError) as err:
        input_messages([{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch"}])
    assert err.value.param == "input.0.input"


@given(st.text())
def test_custom_input_round_trips_through_chat_arguments(text: str) -> None:
    item = {"type": "custom_tool_call", "call_id": "c", "name": "p", "input": text}
    assert item_fields("custom", chat_arguments(item)) == {"input": text}


@given(st.lists(st.text(), min_size=1), st.one_of(st.none(), st.text()),
       st.one_of(st.none(), st.integers(min_value=1, max_value=10**9)))
def test_local_shell_action_round_trips(command: list[str], workdir: str | None,
                                        timeout: int | None) -> None:
    action = {"type": "exec", "command": command, "env": {}, "timeout_ms": timeout,
              "working_directory": workdir, "user": None}
    item = {"type": "local_shell_call", "call_id": "c", "action": action}
    assert item_fields("local_shell", chat_arguments(item)) == {"action": action}


@given(st.text())
def test_arguments_of_any_shape_never_raise(arguments: str) -> None:
    assert isinstance(item_fields("custom", arguments)["input"], str)
    assert item_fields("local_shell", arguments)["action"]["type"] == "exec"


# --- the builder: chat call chunks -> the client's own items -----------------------


def _accumulate(events: list[dict[str, Any]]) -> Any:
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=event))
    return state._completed_response


def _call_chunks(name: str, arguments: str, pieces: int) -> list[dict[str, Any]]:
    step = max(1, len(arguments) // pieces)
    parts = [arguments[i:i + step] for i in range(0, len(arguments), step)] or [""]
    chunks = [{"choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
        {"index": 0, "id": "call_9", "type": "function",
         "function": {"name": name, "arguments": parts[0]}}]}}]}]
    chunks += [{"choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": p}}]}}]} for p in parts[1:]]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return chunks


def _build(name: str, arguments: str, pieces: int = 3) -> list[dict[str, Any]]:
    builder = ResponseBuilder({"model": "m", "tools": [APPLY_PATCH]},
                              kinds={"apply_patch": "custom", "local_shell": "local_shell"})
    events = builder.start()
    for chunk in _call_chunks(name, arguments, pieces):
        events += builder.feed(chunk)
    return events + builder.finish()


@given(st.text(min_size=1), st.integers(min_value=1, max_value=8))
def test_custom_call_streams_its_raw_input_in_any_chunking(text: str, pieces: int) -> None:
    events = _build("apply_patch", orjson.dumps({"input": text}).decode(), pieces)
    kinds_seen = [e["type"] for e in events]
    assert kinds_seen == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
        "response.output_item.done", "response.completed"]
    assert events[3]["delta"] == text and events[4]["input"] == text
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    item = events[-1]["response"]["output"][0]
    assert item["type"] == "custom_tool_call" and item["id"].startswith("ctc_")
    assert (item["call_id"], item["name"], item["input"]) == ("call_9", "apply_patch", text)


def test_sdk_accumulates_the_custom_call() -> None:
    final = _accumulate(_build("apply_patch", orjson.dumps({"input": PATCH}).decode()))
    call = final.output[0]
    assert call.type == "custom_tool_call" and call.input == PATCH and call.call_id == "call_9"


def test_local_shell_call_item() -> None:
    events = _build("local_shell", '{"command": ["ls", "-la"], "workdir": "/tmp"}')
    assert "response.function_call_arguments.delta" not in [e["type"] for e in events]
    final = _accumulate(events)
    call = final.output[0]
    assert call.type == "local_shell_call" and call.call_id == "call_9"
    assert call.action.command == ["ls", "-la"] and call.action.working_directory == "/tmp"


def test_a_function_named_like_nothing_special_stays_a_function_call() -> None:
    final = _accumulate(_build("get_weather", '{"city": "Oslo"}'))
    assert final.output[0].type == "function_call"
    assert final.output[0].arguments == '{"city": "Oslo"}'


def test_continuation_history_keeps_the_custom_call() -> None:
    builder = ResponseBuilder({"model": "m"}, kinds={"apply_patch": "custom"})
    for chunk in _call_chunks("apply_patch", orjson.dumps({"input": PATCH}).decode(), 2):
        builder.feed(chunk)
    builder.finish()
    message = builder.assistant_message()
    assert message is not None
    call = message["tool_calls"][0]
    assert call["id"] == "call_9" and call["function"]["name"] == "apply_patch"
    assert orjson.loads(call["function"]["arguments"]) == {"input": PATCH}
