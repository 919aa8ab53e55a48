"""The one reader of a history's assistant calls, and the names it already called."""

from __future__ import annotations

from proxy.transforms.request.history import called_names, history_calls


def test_history_calls_reads_tool_calls_and_legacy_function_call() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        "not a call"],
        "function_call": {"name": "old", "arguments": "{}"}}
    assert history_calls(message) == [("call_1", "get_weather", '{"city": "Paris"}'),
                                      ("", "old", "{}")]


def test_called_names_agrees_with_history_calls_and_skips_nameless_calls() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "first"}},
                                             {"id": "b", "function": {"arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
        {"role": "assistant", "function_call": {"name": "second", "arguments": "{}"}},
    ]
    assert called_names(messages) == ["first", "second"]
    assert called_names(messages) == [name for m in messages if m["role"] == "assistant"
                                      for _, name, _ in history_calls(m) if name]
