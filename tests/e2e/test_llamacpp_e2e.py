"""Through toolshim against a fake llama-cpp-python server that breaks tool calling like
the real one: every quirk is recognised, worked around, and remembered under `learned:`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.capfile import edit_and_wait, learned, learned_entry
from support.fake_llamacpp import MODEL, FakeLlamaCpp
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.settings import Settings

TIME: Any = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {}}}}
ASK: Any = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def llama() -> FakeLlamaCpp:
    return FakeLlamaCpp()


@pytest.fixture
def proxy(llama: FakeLlamaCpp, caps_path: Path) -> Iterator[str]:
    with serve(llama.app, lifespan="off") as backend:
        settings = Settings.model_validate({"upstreams": (backend,),
                                            "capabilities": str(caps_path),
                                            "reload_interval": 0.0})
        with serve(create_app(settings)) as url:
            yield url


@pytest.fixture
def sdk(proxy: str, new_sdk: Callable[..., openai.OpenAI]) -> openai.OpenAI:
    return new_sdk(proxy)


def _stream(sdk: openai.OpenAI, **kwargs: Any) -> tuple[list[Any], dict[int, dict[str, str]]]:
    chunks = list(sdk.chat.completions.create(model=MODEL, messages=ASK, stream=True,
                                              temperature=0, **kwargs))
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = slot["id"] or (call.id or "")
                if call.function is not None:
                    slot["name"] = slot["name"] or (call.function.name or "")
                    slot["arguments"] += call.function.arguments or ""
    return chunks, calls


def _finish(chunks: list[Any]) -> list[str]:
    return [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason]


def test_streamed_tools_answered_whole_then_streamed_and_remembered(
        sdk: openai.OpenAI, llama: FakeLlamaCpp, caps_path: Path) -> None:
    chunks, calls = _stream(sdk, tools=[WEATHER], tool_choice="auto")
    assert list(calls.values()) == [{"id": "call__0_get_weather_cmpl-ea2d",
                                     "name": "get_weather", "arguments": '{ "city": "Paris" }'}]
    assert _finish(chunks) == ["tool_calls"]
    assert [r.get("stream") for r in llama.requests] == [True, None]  # empty stream, resent
    # Keyed by the name as written: not Ollama, so no `:latest` is added.
    entry = learned_entry(caps_path, MODEL, holding="stream_tools")
    assert entry["stream_tools"] is False and entry["source"] == "runtime_error"
    assert "empty event stream" in entry["evidence"]

    _stream(sdk, tools=[WEATHER], tool_choice="auto")
    assert "stream" not in llama.requests[-1] and len(llama.requests) == 3


def test_a_learned_key_gets_no_ollama_tag_on_another_server(
        sdk: openai.OpenAI, proxy: str, caps_path: Path) -> None:
    _stream(sdk, tools=[WEATHER], tool_choice="auto")
    learned_entry(caps_path, MODEL, holding="stream_tools")
    assert list(learned(caps_path)) == [MODEL]
    console = httpx.get(f"{proxy}/admin/models", timeout=10).json()
    names = [m["name"] for m in console["models"]]
    assert names.count(MODEL) == 1 and f"{MODEL}:latest" not in names


def test_tools_without_tool_choice_are_really_offered(sdk: openai.OpenAI,
                                                      llama: FakeLlamaCpp) -> None:
    reply = sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER])
    assert llama.requests[-1]["tool_choice"] == "auto"
    calls = reply.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather"]  # type: ignore[union-attr]
    assert reply.choices[0].finish_reason == "tool_calls"


def test_required_becomes_the_named_tool_and_is_remembered(
        sdk: openai.OpenAI, llama: FakeLlamaCpp, caps_path: Path) -> None:
    reply = sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER],
                                        tool_choice="required")
    assert reply.choices[0].finish_reason == "tool_calls"
    assert [r["tool_choice"] for r in llama.requests] == [
        "required", {"type": "function", "function": {"name": "get_weather"}}]
    assert learned_entry(caps_path, MODEL, holding="required_tool_choice")["required_tool_choice"] == "rewrite"

    chunks, calls = _stream(sdk, tools=[WEATHER], tool_choice="required")
    assert [c["name"] for c in calls.values()] == ["get_weather"]
    assert _finish(chunks) == ["tool_calls"]


def test_required_with_several_tools_is_auto_plus_a_note(
        sdk: openai.OpenAI, llama: FakeLlamaCpp, caps_path: Path, proxy: str) -> None:
    edit_and_wait(caps_path, f"version: 1\nmodels:\n  {MODEL}:\n    required_tool_choice: rewrite\n",
                  proxy)
    sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER, TIME],
                                tool_choice="required")
    sent = llama.requests[-1]
    assert sent["tool_choice"] == "auto" and len(llama.requests) == 1
    assert sent["messages"][0]["role"] == "system"
    assert "calling one of the provided tools" in sent["messages"][0]["content"]


def test_named_function_streamed_assembles_one_call(sdk: openai.OpenAI) -> None:
    chunks, calls = _stream(sdk, tools=[WEATHER],
                            tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert list(calls.values()) == [{"id": "call__0_get_weather_cmpl-a45c",
                                     "name": "get_weather", "arguments": '{ "city": "Paris" }'}]
    assert _finish(chunks) == ["tool_calls"]


def test_agent_turn_with_null_content_is_resent_with_empty_text(
        sdk: openai.OpenAI, llama: FakeLlamaCpp, caps_path: Path) -> None:
    first = sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER])
    turn = first.choices[0].message
    assert turn.content is None and turn.tool_calls
    history: Any = [*ASK, turn.model_dump(exclude_none=False, exclude_unset=True),
                    {"role": "tool", "tool_call_id": turn.tool_calls[0].id,
                     "content": '{"temp_c": 18}'}]
    history[1]["content"] = None
    final = sdk.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER])
    assert final.choices[0].finish_reason in ("stop", "tool_calls")
    assert [r["messages"][1]["content"] for r in llama.requests[1:]] == [None, ""]
    assert learned_entry(caps_path, MODEL, holding="null_content")["null_content"] is False


def test_usage_chunk_filled_in_when_the_backend_sends_none(sdk: openai.OpenAI) -> None:
    chunks, _ = _stream(sdk, stream_options={"include_usage": True})
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and chunks[-1].usage is not None and chunks[-1].choices == []
    assert usage[0].completion_tokens == 6  # one per streamed piece of "The weather in ..."
    assert usage[0].total_tokens == usage[0].prompt_tokens + 6


def test_usage_of_an_adapted_stream_is_the_backends(sdk: openai.OpenAI) -> None:
    chunks, calls = _stream(sdk, tools=[WEATHER], tool_choice="auto",
                            stream_options={"include_usage": True})
    assert calls and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 31


def test_unknown_model_is_not_answered_by_another(sdk: openai.OpenAI,
                                                  llama: FakeLlamaCpp) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        sdk.chat.completions.create(model="no-such-model", messages=ASK)
    assert info.value.code == "model_not_found"
    assert llama.requests == []


def test_traceback_in_an_upstream_error_stays_in_the_log(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        sdk.chat.completions.create(model=MODEL, messages=[{"role": "wizard", "content": "hi"}])
    message = info.value.message
    assert "7 validation errors:" in message and "HTTP 500" in message
    assert "site-packages" not in message and "app.py" not in message
