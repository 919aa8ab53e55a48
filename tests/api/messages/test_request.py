"""Messages request -> chat request: the whole shape clients send, pure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.api.messages.request import to_chat, validate
from proxy.errors import ApiError

TOOL: Any = {"name": "Read", "description": "Read a file",
             "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                              "type": "object", "properties": {"file_path": {"type": "string"}},
                              "required": ["file_path"]},
             "cache_control": {"type": "ephemeral"}, "defer_loading": False, "strict": True}


def _chat(**body: Any) -> Any:
    body.setdefault("model", "m")
    body.setdefault("max_tokens", 64)
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return to_chat(validate(body))


def test_claude_code_shape() -> None:
    out = _chat(
        system=[{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"},
                {"type": "text", "text": "You are Claude Code.",
                 "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "read a.txt",
                                          "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "plan", "signature": "s"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read",
                 "input": {"file_path": "/a.txt"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                 "content": "no such file"},
                {"type": "text", "text": "try again"}]},
            {"role": "system", "content": "Reminder: be brief."}],
        tools=[TOOL, {"type": "web_search_20250305", "name": "web_search"},
               {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 20000}, stream=True,
        metadata={"user_id": "u"}, output_config={"effort": "high"},
        context_management={"edits": []}, temperature=0.5, top_k=40,
        stop_sequences=["\n\nHuman:"])
    chat = out.chat
    assert chat["messages"] == [
        {"role": "system", "content": "x-anthropic-billing-header: cc_version=2.1\n\n"
                                      "You are Claude Code.\n\nReminder: be brief."},
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "Read", "arguments": '{"file_path":"/a.txt"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: no such file"},
        {"role": "user", "content": "try again"}]
    assert chat["tools"] == [{"type": "function", "function": {
        "name": "Read", "description": "Read a file", "parameters": TOOL["input_schema"]}}]
    assert (chat["tool_choice"], chat["parallel_tool_calls"]) == ("required", False)
    assert (chat["reasoning_effort"], chat["stream"], chat["stream_options"]) == (
        "high", True, {"include_usage": True})
    assert (chat["temperature"], chat["top_k"], chat["stop"]) == (0.5, 40, ["\n\nHuman:"])
    for dropped in ("metadata", "output_config", "context_management", "thinking", "system"):
        assert dropped not in chat
    assert (out.stripped, out.thinking) == (2, True)


def test_images_base64_and_url() -> None:
    chat = _chat(messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBO"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
        {"type": "text", "text": "what?"}]}]).chat
    assert chat["messages"][0]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        {"type": "text", "text": "what?"}]


def test_tool_result_blocks_and_images() -> None:
    chat = _chat(messages=[{"role": "user", "content": [{
        "type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"},
            {"type": "image", "source": {"type": "url", "url": "https://x/s.png"}}]}]}]).chat
    assert chat["messages"] == [
        {"role": "tool", "tool_call_id": "t1", "content": "line 1\nline 2"},
        {"role": "user", "content": [{"type": "image_url",
                                      "image_url": {"url": "https://x/s.png"}}]}]


@pytest.mark.parametrize(("thinking", "effort", "shown"), [
    ({"type": "enabled", "budget_tokens": 1024}, "low", True),
    ({"type": "enabled", "budget_tokens": 8000}, "medium", True),
    ({"type": "adaptive"}, None, True),
    ({"type": "disabled"}, "none", False),
    (None, None, False)])
def test_thinking_switch(thinking: Any, effort: str | None, shown: bool) -> None:
    out = _chat(thinking=thinking)
    assert out.chat.get("reasoning_effort") == effort and out.thinking is shown


@pytest.mark.parametrize(("choice", "sent"), [
    ({"type": "auto"}, "auto"), ({"type": "none"}, "none"),
    ({"type": "tool", "name": "Read"}, {"type": "function", "function": {"name": "Read"}}),
    ({"type": "tool", "name": "web_search"}, None)])
def test_tool_choice(choice: Any, sent: Any) -> None:
    chat = _chat(tools=[TOOL, {"type": "web_search_20250305", "name": "web_search"}],
                 tool_choice=choice).chat
    assert chat.get("tool_choice") == sent


def test_plain_text_document_is_text() -> None:
    chat = _chat(messages=[{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                        "data": "doc body"}}]}]).chat
    assert chat["messages"] == [{"role": "user", "content": "doc body"}]


@pytest.mark.parametrize(("body", "where"), [
    ({"max_tokens": "5"}, "max_tokens"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "video"}]}]},
     "messages.0.content.0.type"),
    ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "x"}]}]},
     "messages.0.content.0.id"),
    ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
    ({"tool_choice": {"type": "tool"}}, "tool_choice.name"),
    ({"system": [{"type": "image"}]}, "system.0"),
    ({"top_k": -1}, "top_k")])
def test_bad_fields_are_named(body: Any, where: str) -> None:
    with pytest.raises(ApiError) as info:
        _chat(**body)
    assert info.value.status == 400 and info.value.message.startswith(where + ":")


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["type", "role", "content", "text",
                                                       "source", "id", "name", "input",
                                                       "tool_use_id"]), inner, max_size=4),
                    max_leaves=12))
def test_any_messages_value_is_translated_or_a_400(messages: Any) -> None:
    try:
        _chat(messages=messages if isinstance(messages, list) else [messages])
    except ApiError as exc:
        assert exc.status == 400
