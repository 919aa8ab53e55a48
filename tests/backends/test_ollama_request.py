"""OpenAI chat request -> native /api/chat body (openai.go FromChatRequest, docs/backends.md 1d)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.ollama_request import to_native
from proxy.errors import ApiError

safe_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                           | safe_text,
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(safe_text, inner, max_size=3),
                           max_leaves=8)


@given(st.dictionaries(safe_text, json_values, max_size=4),
       st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=10))
def test_tool_call_arguments_become_the_same_object(arguments: dict[str, Any],
                                                    name: str) -> None:
    request = {"model": "m", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"}]}
    body = to_native(request)
    call = body["messages"][0]["tool_calls"][0]
    assert call == {"id": "call_1", "function": {"index": 0, "name": name,
                                                 "arguments": arguments}}
    assert body["messages"][0]["content"] == ""
    assert body["messages"][1]["tool_name"] == name


@given(st.lists(st.sampled_from(["system", "user", "assistant"]), min_size=1, max_size=6))
def test_every_message_keeps_its_place(roles: list[str]) -> None:
    messages = [{"role": r, "content": f"m{i}"} for i, r in enumerate(roles)]
    body = to_native({"model": "m", "messages": messages})
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        (m["role"], m["content"]) for m in messages]
    assert body["stream"] is False and "options" not in body


def test_options_format_think_and_window() -> None:
    body = to_native({"model": "m", "messages": [{"role": "user", "content": "x"}],
                      "stream": True, "max_tokens": 9, "temperature": 0, "top_p": 0.5,
                      "seed": 1, "stop": ["a", 3], "reasoning_effort": "none",
                      "response_format": {"type": "json_schema",
                                          "json_schema": {"name": "s", "schema": {"type":
                                                                                  "object"}}},
                      "tools": [{"type": "function", "function": {"name": "f"}}],
                      "tool_choice": "auto", "user": "ignored"},
                     num_ctx=16384, keep_alive=-1, ollama_options={"num_gpu": 2, "seed": 7})
    assert body == {"model": "m", "messages": [{"role": "user", "content": "x"}],
                    "stream": True, "tools": [{"type": "function", "function": {"name": "f"}}],
                    "format": {"type": "object"}, "think": False, "keep_alive": -1,
                    "options": {"num_gpu": 2, "seed": 1, "temperature": 0, "top_p": 0.5,
                                "num_predict": 9, "stop": ["a"], "num_ctx": 16384}}


@pytest.mark.parametrize("effort,think", [("minimal", "low"), ("medium", "medium"),
                                          ("xhigh", "max")])
def test_reasoning_effort_maps_like_ollama(effort: str, think: str) -> None:
    body = to_native({"model": "m", "messages": [], "reasoning": {"effort": effort}})
    assert body["think"] == think


@pytest.mark.parametrize("part,message", [
    ({"type": "image_url", "image_url": {"url": "https://x/y.png"}}, "image URLs"),
    ({"type": "image_url", "image_url": {"url": "data:image/png,raw"}}, "invalid image"),
])
def test_images_that_native_cannot_take_are_400(part: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as caught:
        to_native({"model": "m", "messages": [{"role": "user", "content": [part]}]})
    assert caught.value.status == 400 and message in caught.value.message


def test_broken_history_arguments_and_effort_are_400() -> None:
    bad_call = {"role": "assistant", "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": "{nope"}}]}
    for request in ({"model": "m", "messages": [bad_call]},
                    {"model": "m", "messages": [], "reasoning_effort": "huge"}):
        with pytest.raises(ApiError) as caught:
            to_native(request)
        assert caught.value.status == 400


def test_developer_role_is_the_system_prompt() -> None:
    body = to_native({"model": "m", "messages": [{"role": "developer", "content": "be brief"}]})
    assert body["messages"] == [{"role": "system", "content": "be brief"}]
