"""Every door's request translation on a real client's body with any one value replaced
by any JSON: it translates, or it is a 400 naming what is wrong. Never a crash (a
TypeError from a list where a string was expected is a 500 and a logged bug)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.chat.request import parse_chat_request
from proxy.api.gemini.request import to_chat as gemini_to_chat
from proxy.api.messages.request import to_chat as messages_to_chat
from proxy.api.messages.request import validate as messages_validate
from proxy.api.responses.request import to_chat as responses_to_chat
from proxy.api.responses.request import validate as responses_validate
from proxy.errors import ApiError

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

# One body per door, with every part toolshim reads: tools, a call, its result, choices.
BODIES: dict[str, tuple[Any, Callable[[Any], object]]] = {
    "chat": ({"model": "m", "stream": True, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
                                                    "parameters": SCHEMA}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False, "stream_options": {"include_usage": True}},
        lambda body: parse_chat_request(json.dumps(body).encode())),
    "responses": ({"model": "m", "instructions": "be brief", "stream": True, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather",
         "arguments": "{\"city\":\"Oslo\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "done"}],
        "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA},
                  {"type": "custom", "name": "apply_patch", "format": {
                      "type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
                  {"type": "web_search"}],
        "tool_choice": "auto", "text": {"format": {"type": "json_schema", "name": "x",
                                                   "schema": SCHEMA}},
        "reasoning": {"effort": "low"}, "max_output_tokens": 100, "temperature": 0.2},
        lambda body: responses_to_chat(responses_validate(body), [])),
    "messages": ({"model": "m", "max_tokens": 100, "stream": True,
                  "system": [{"type": "text", "text": "be brief"}], "messages": [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "sunny"}]}]}],
        "tools": [{"name": "get_weather", "input_schema": SCHEMA},
                  {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "thinking": {"type": "enabled", "budget_tokens": 1024}, "temperature": 0.2},
        lambda body: messages_to_chat(messages_validate(body))),
    "gemini": ({"systemInstruction": {"parts": [{"text": "be brief"}]}, "contents": [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather",
                                                      "args": {"city": "Oslo"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather",
                                                         "response": {"output": "sunny"}}}]}],
        "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {
            "type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                                 "allowedFunctionNames": ["get_weather"]}},
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 100,
                             "thinkingConfig": {"thinkingBudget": 0}}},
        lambda body: gemini_to_chat(body, "m", stream=True)),
}

JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)  # what orjson reads as ints
                    | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)


def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in `value` a value sits (the root excluded)."""
    found: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found.append((*at, key))
        found += paths(child, (*at, key))
    return found


def replaced(body: Any, path: tuple[Any, ...], new: Any) -> Any:
    body = copy.deepcopy(body)
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return body


@pytest.mark.parametrize("door", sorted(BODIES))
def test_the_real_body_translates(door: str) -> None:
    body, translate = BODIES[door]
    translate(copy.deepcopy(body))


@pytest.mark.parametrize("door", sorted(BODIES))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_value_replaced_translates_or_is_a_400(door: str, data: st.DataObject) -> None:
    body, translate = BODIES[door]
    path = data.draw(st.sampled_from(paths(body)), label="path")
    new = data.draw(JSON, label="value")
    try:
        translate(replaced(body, path, new))
    except ApiError as exc:
        assert exc.status == 400, exc.message
