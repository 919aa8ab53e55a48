"""The generateContent body -> chat request: Gemini CLI's shape, the pairing of calls
and responses (by id, else by name and order), tool config, generation config, and
a 400 naming the field for what cannot be translated."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.gemini.request import to_chat
from proxy.errors import ApiError


def _chat(body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return to_chat(body, "m", stream=False, **kwargs).chat


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


@st.composite
def turn_pair(draw: Any) -> tuple[list[dict[str, Any]], list[int], bool]:
    """A model turn's calls and the next turn's responses, answered in some order.

    Without ids, calls of one name can only be told apart by order, so the order
    within a name is kept; with ids any order works."""
    names = draw(st.lists(st.sampled_from(["read", "write", "grep"]), min_size=1, max_size=5))
    with_ids = draw(st.booleans())
    order = list(draw(st.permutations(range(len(names)))))
    if not with_ids:  # shuffle the names, keep each name's calls in order
        groups: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            groups.setdefault(name, []).append(i)
        order = [groups[name].pop(0) for name in draw(st.permutations(names))]
    calls = []
    for i, name in enumerate(names):
        call: dict[str, Any] = {"name": name, "args": {"n": i}}
        if with_ids:
            call["id"] = f"id-{i}"
        calls.append(call)
    return calls, order, with_ids


@settings(max_examples=150, deadline=None)
@given(turn_pair(), st.booleans())
def test_calls_and_responses_pair_up(pair: tuple[list[dict[str, Any]], list[int], bool],
                                     made_up_ids: bool) -> None:
    calls, order, with_ids = pair
    responses = []
    for i in order:
        response: dict[str, Any] = {"name": calls[i]["name"], "response": {"output": f"r{i}"}}
        if with_ids:
            response["id"] = calls[i]["id"]
        elif made_up_ids:  # as a client that synthesizes its own ids would send them
            response["id"] = f"synth_{i}"
        responses.append({"functionResponse": response})
    chat = _chat({"contents": [user({"text": "go"}),
                               model(*({"functionCall": c} for c in calls)),
                               user(*responses)]})
    messages = chat["messages"]
    assistant = messages[1]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == len(ids)
    tools = messages[2:]
    assert [m["role"] for m in tools] == ["tool"] * len(calls)
    for message in tools:
        i = ids.index(message["tool_call_id"])  # names a call of the turn before
        assert message["content"] == f"r{i}"  # and the one it answers
    if with_ids:
        assert ids == [c["id"] for c in calls]


def test_gemini_cli_shape() -> None:
    body = {
        "contents": [
            user({"text": "read a.txt"}),
            model({"text": "thinking...", "thought": True},
                  {"functionCall": {"name": "read_file", "args": {"path": "a.txt"}},
                   "thoughtSignature": "skip_thought_signature_validator"}),
            user({"functionResponse": {"name": "read_file",
                                       "response": {"output": "hello"}}}),
            model({"text": "It says hello."}),
            user({"text": "and this?"},
                 {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})],
        "systemInstruction": {"role": "user", "parts": [{"text": "You are an agent."}]},
        "tools": [{"functionDeclarations": [{
            "name": "read_file", "description": "Read a file",
            "parametersJsonSchema": {"type": "object", "properties": {
                "path": {"type": "string"}, "wait_for_previous": {"type": "boolean"}},
                "required": ["path"], "additionalProperties": False}}]},
            {"googleSearch": {}}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64,
                             "thinkingConfig": {"includeThoughts": True,
                                                "thinkingBudget": 8192}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"}],
        "labels": {"a": "b"}, "cachedContent": "cachedContents/x"}
    translated = to_chat(body, "qwen3:8b", stream=True)
    chat = translated.chat
    assert translated.stripped == 1 and translated.thoughts
    assert chat["messages"] == [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1_1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'}}]},
        {"role": "tool", "tool_call_id": "call_1_1", "content": "hello"},
        {"role": "assistant", "content": "It says hello."},
        {"role": "user", "content": [
            {"type": "text", "text": "and this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]
    assert chat["tools"] == [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file",
        "parameters": body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]}}]
    assert (chat["tool_choice"], chat["temperature"], chat["top_p"], chat["top_k"],
            chat["reasoning_effort"]) == ("auto", 1, 0.95, 64, "medium")
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert chat["model"] == "qwen3:8b"
    for key in ("safetySettings", "labels", "cachedContent"):
        assert key not in str(chat)


TOOLS = [{"functionDeclarations": [{"name": n} for n in ("a", "b", "c")]}]


@pytest.mark.parametrize(("config", "names", "choice"), [
    ({"mode": "AUTO"}, ["a", "b", "c"], "auto"),
    ({"mode": "VALIDATED"}, ["a", "b", "c"], "auto"),
    ({"mode": "NONE"}, ["a", "b", "c"], "none"),
    ({"mode": "ANY"}, ["a", "b", "c"], "required"),
    ({"mode": "ANY", "allowedFunctionNames": ["a", "c"]}, ["a", "c"], "required"),
    ({"mode": "ANY", "allowedFunctionNames": ["b"]}, ["b"],
     {"type": "function", "function": {"name": "b"}}),
    ({}, ["a", "b", "c"], None),
])
def test_function_calling_config(config: dict[str, Any], names: list[str], choice: Any) -> None:
    chat = _chat({"contents": [user({"text": "x"})], "tools": TOOLS,
                  "toolConfig": {"functionCallingConfig": config}})
    assert [t["function"]["name"] for t in chat["tools"]] == names
    assert chat.get("tool_choice") == choice


def test_parameters_in_the_schema_dialect_and_response_schema() -> None:
    chat = _chat({"contents": [user({"text": "x"})],
                  "tools": [{"functionDeclarations": [{"name": "f", "parameters": {
                      "type": "OBJECT", "properties": {"q": {"type": "STRING"}}}}]}],
                  "generationConfig": {"responseMimeType": "application/json",
                                       "responseSchema": {"type": "ARRAY",
                                                          "items": {"type": "INTEGER"}},
                                       "thinkingConfig": {"thinkingLevel": "LOW"},
                                       "candidateCount": 1, "maxOutputTokens": 50}})
    assert chat["tools"][0]["function"]["parameters"] == {
        "type": "object", "properties": {"q": {"type": "string"}}}
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": {"type": "array", "items": {"type": "integer"}}}}
    assert (chat["reasoning_effort"], chat["max_tokens"]) == ("low", 50)
    plain = _chat({"contents": [user({"text": "x"})], "generationConfig": {
        "responseMimeType": "application/json", "thinkingConfig": {"thinkingBudget": 0}}})
    assert plain["response_format"] == {"type": "json_object"}
    assert plain["reasoning_effort"] == "none"


@pytest.mark.parametrize(("body", "field"), [
    ({}, "contents"),
    ({"contents": []}, "contents"),
    ({"contents": [{"role": "robot", "parts": []}]}, "contents[0].role"),
    ({"contents": [user({"fileData": {"fileUri": "gs://x"}})]}, "contents[0].parts[0]"),
    ({"contents": [user({"inlineData": {"mimeType": "audio/wav", "data": "AA=="}})]},
     "contents[0].parts[0].inlineData.mimeType"),
    ({"contents": [user({"functionResponse": {"name": "f", "response": {}}})]},
     "contents[0].parts[0].functionResponse"),
    ({"contents": [model({"functionCall": {"name": "f", "args": [1]}})]},
     "contents[0].parts[0].functionCall.args"),
    ({"contents": [user({"text": "x"})], "generationConfig": {"candidateCount": 2}},
     "generationConfig.candidateCount"),
    ({"contents": [user({"text": "x"})], "generationConfig": {"temperature": "hot"}},
     "generationConfig.temperature"),
    ({"contents": [user({"text": "x"})],
      "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}},
     "toolConfig.functionCallingConfig.mode"),
    ({"contents": [user({"text": "x"})], "tools": [{"functionDeclarations": [{}]}]},
     "tools[0].functionDeclarations[0].name"),
    ({"contents": [user({"text": 5})]}, "contents[0].parts[0].text"),
    ({"contents": [user({"text": "x"})], "systemInstruction": {"parts": [{"inlineData": {}}]}},
     "systemInstruction.parts[0]"),
])
def test_a_bad_body_is_a_400_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiError) as caught:
        _chat(body)
    assert caught.value.status == 400
    assert field in caught.value.message


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.sampled_from(
                        ["contents", "role", "parts", "text", "functionCall", "name", "args",
                         "functionResponse", "id", "tools", "functionDeclarations",
                         "generationConfig", "toolConfig", "systemInstruction", "type",
                         "parameters", "inlineData", "thought"]), inner, max_size=4),
                    max_leaves=20))
def test_any_body_translates_or_is_a_400(body: Any) -> None:
    try:
        to_chat(body, "m", stream=False)
    except ApiError as exc:
        assert exc.status == 400


def test_snake_case_field_names_as_the_sdk_sends_some() -> None:
    # google-genai 3.x sends `thinkingConfig: {"include_thoughts": ..., "thinking_budget": ...}`;
    # Google's parser takes either name of a field (proto3 JSON). Carried data stays as sent.
    translated = to_chat({"contents": [
        {"role": "model", "parts": [{"function_call": {"name": "f", "args": {"a_b": 1}}}]},
        {"role": "user", "parts": [{"function_response": {"name": "f", "response": {}}},
                                   {"inline_data": {"mime_type": "image/png", "data": "AA=="}}]}],
        "system_instruction": {"parts": [{"text": "sys"}]},
        "tools": [{"function_declarations": [{"name": "f", "parameters": {
            "type": "OBJECT", "properties": {"snake_name": {"type": "ARRAY", "min_items": "1",
                                                            "items": {"type": "STRING"}}}}}]}],
        "tool_config": {"function_calling_config": {"mode": "ANY",
                                                    "allowed_function_names": ["f"]}},
        "generation_config": {"max_output_tokens": 9, "thinking_config": {
            "include_thoughts": True, "thinking_budget": 20000}}}, "m", stream=False)
    chat = translated.chat
    assert translated.thoughts and chat["reasoning_effort"] == "high"
    assert chat["messages"][0] == {"role": "system", "content": "sys"}
    assert chat["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"a_b":1}'
    assert chat["messages"][3]["content"][0]["image_url"]["url"].startswith("data:image/png")
    assert chat["tools"][0]["function"]["parameters"]["properties"] == {
        "snake_name": {"type": "array", "minItems": 1, "items": {"type": "string"}}}
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert chat["max_tokens"] == 9
