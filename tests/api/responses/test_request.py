"""Responses request body -> chat request: every shape, and properties over random bodies."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.responses.request import Translated, to_chat, validate
from proxy.errors import ApiError

FN: dict[str, Any] = {"type": "function", "name": "f", "description": "d",
                      "parameters": {"type": "object"}, "strict": True}


def _translate(**body: Any) -> Translated:
    return to_chat(validate({"model": "m", "input": "hi", **body}), [])


def test_string_input_and_instructions() -> None:
    out = _translate(instructions="sys")
    assert out.chat == {"model": "m", "messages": [{"role": "system", "content": "sys"},
                                                   {"role": "user", "content": "hi"}]}
    assert out.conversation == [{"role": "user", "content": "hi"}]


def test_message_items_and_parts() -> None:
    out = _translate(input=[
        {"role": "developer", "content": "be nice"},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look: "},
            {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "low"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "a cat", "annotations": []}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "x"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}])
    assert out.chat["messages"] == [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": [
            {"type": "text", "text": "look: "},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA",
                                                "detail": "low"}}]},
        {"role": "assistant", "content": "a cat"},
        {"role": "user", "content": "thanks"}]


def test_calls_join_the_assistant_turn_and_outputs_become_tool_messages() -> None:
    out = _translate(input=[
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "calling"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2",
         "output": [{"type": "input_text", "text": "two"}]}])
    assert out.chat["messages"][1:] == [
        {"role": "assistant", "content": "calling", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"}]


def test_tools_choice_and_sampling() -> None:
    out = _translate(tools=[FN, {"type": "web_search"}, {"type": "computer_use_preview"}],
                     tool_choice={"type": "function", "name": "f"}, parallel_tool_calls=False,
                     max_output_tokens=9, temperature=0.5, top_p=0.5, user="u",
                     metadata={"a": "b"}, store=False, reasoning={"effort": "low"},
                     text={"format": {"type": "json_schema", "name": "s",
                                      "schema": {"type": "object"}, "strict": True}},
                     stream=True)
    chat = out.chat
    assert out.stripped == 2 and out.tools == [FN]
    assert chat["tools"] == [{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert (chat["parallel_tool_calls"], chat["max_tokens"], chat["temperature"],
            chat["top_p"], chat["user"], chat["reasoning_effort"]) == (False, 9, 0.5, 0.5, "u",
                                                                       "low")
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "s", "schema": {"type": "object"}, "strict": True}}
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert "metadata" not in chat and "store" not in chat


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_choice_modes(choice: str) -> None:
    assert _translate(tools=[FN], tool_choice=choice).chat["tool_choice"] == choice


def test_allowed_tools_and_json_object() -> None:
    g = {**FN, "name": "g"}
    out = _translate(tools=[FN, g], text={"format": {"type": "json_object"}},
                     tool_choice={"type": "allowed_tools", "mode": "required",
                                  "tools": [{"type": "function", "name": "g"}]})
    assert [t["function"]["name"] for t in out.chat["tools"]] == ["g"]
    assert out.chat["tool_choice"] == "required"
    assert out.chat["response_format"] == {"type": "json_object"}


def test_history_comes_first() -> None:
    history: list[Any] = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    out = to_chat(validate({"model": "m", "input": "c", "instructions": "i"}), history)
    assert [m["content"] for m in out.chat["messages"]] == ["i", "a", "b", "c"]
    assert [m["content"] for m in out.conversation] == ["a", "b", "c"]


@pytest.mark.parametrize(("body", "param"), [
    ({"input": []}, "input"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input.0.type"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input.0.content.0.type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
     "input.0.content.0.image_url"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input.0.arguments"),
    ({"tools": [FN], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name"),
    ({"text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"metadata": {"a": 1}}, "metadata"),
    # A string "false" would have started a stream (or stored the response).
    ({"stream": "false"}, "stream"),
    ({"store": "false"}, "store"),
    ({"parallel_tool_calls": "false"}, "parallel_tool_calls"),
])
def test_bad_fields_are_named(body: dict[str, Any], param: str) -> None:
    with pytest.raises(ApiError) as info:
        to_chat(validate({"model": "m", "input": "x", **body}), [])
    assert info.value.status == 400 and info.value.param == param


# --- properties ---------------------------------------------------------------------

_word = st.text(min_size=0, max_size=6)
_message = st.fixed_dictionaries({
    "role": st.sampled_from(["user", "assistant", "system", "developer"]),
    "content": st.one_of(_word, st.lists(st.builds(
        lambda t: {"type": "input_text", "text": t}, _word), max_size=3))})
_call = st.builds(lambda i, n: {"type": "function_call", "call_id": f"c{i}", "name": n,
                                "arguments": "{}"}, st.integers(0, 99), st.sampled_from("fg"))
_output = st.builds(lambda i, o: {"type": "function_call_output", "call_id": f"c{i}",
                                  "output": o}, st.integers(0, 99), _word)
_reasoning = st.just({"type": "reasoning", "id": "rs", "summary": []})
_items = st.lists(st.one_of(_message, _call, _output, _reasoning), min_size=1, max_size=12)
_hosted = st.sampled_from(["web_search", "file_search", "code_interpreter",
                           "computer_use_preview", "image_generation", "mcp"])


@settings(max_examples=200, deadline=None)
@given(_items, st.lists(_hosted, max_size=4), st.booleans())
def test_items_translate_faithfully(items: list[dict[str, Any]], hosted: list[str],
                                    with_fn: bool) -> None:
    tools = [{"type": t} for t in hosted] + ([FN] if with_fn else [])
    if not any(i.get("type") != "reasoning" for i in items):
        return
    out = to_chat(validate({"model": "m", "input": items, "tools": tools}), [])
    messages = out.chat["messages"]
    calls = [c for m in messages for c in m.get("tool_calls") or []]
    assert [c["id"] for c in calls] == [i["call_id"] for i in items
                                        if i.get("type") == "function_call"]
    assert [m["content"] for m in messages if m["role"] == "tool"] == \
        [i["output"] for i in items if i.get("type") == "function_call_output"]
    said = [m for m in messages if m["role"] != "tool" and m.get("content") is not None]
    assert len(said) == sum(1 for i in items if "role" in i)
    assert out.stripped == len(hosted) and ("tools" in out.chat) == with_fn


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) |
                     st.dictionaries(st.sampled_from(["type", "role", "content", "text",
                                                      "name", "call_id", "output",
                                                      "arguments", "image_url"]), inner,
                                     max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["input", "tools", "tool_choice", "text", "reasoning",
                                        "instructions", "temperature"]), _json, max_size=5))
def test_any_body_is_translated_or_a_400(fields: dict[str, Any]) -> None:
    body = {"model": "m", "input": "x", **fields}
    try:
        to_chat(validate(body), [])
    except ApiError as exc:
        assert exc.status == 400 and exc.param
