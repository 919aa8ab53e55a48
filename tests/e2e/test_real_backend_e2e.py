"""Through toolshim against the real llama-cpp-python server (SmolLM2-135M), openai SDK.

The model is tiny and often talks nonsense, so these tests assert on the wire:
shapes, finish reasons, `[DONE]`, calls assembled, no 500s; at temperature 0
its answers are deterministic. Tier marker: `real_backend` (docs/real-backend.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.real_backend import MODEL, real_server
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings

pytestmark = pytest.mark.real_backend

# Fuller than support.tools.WEATHER: a real model picks a tool and its argument by their
# descriptions.
WEATHER_DESCRIBED: Any = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string",
                                                             "description": "City name"}},
                   "required": ["city"]}}}
ASK: Any = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED: Any = {"type": "function", "function": {"name": "get_weather"}}
LIMITS: Any = {"temperature": 0, "max_tokens": 48}


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with real_server(tmp_path_factory.mktemp("real-backend")) as url:
        yield url


@pytest.fixture(scope="module")
def caps_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("caps") / "capabilities.yaml"
    path.write_text("version: 1\n")
    return path


@pytest.fixture(scope="module")
def proxy(backend: str, caps_file: Path) -> Iterator[str]:
    settings = Settings.model_validate({"upstreams": (backend,), "capabilities": str(caps_file),
                                        "reload_interval": 0.0, "read_timeout": 120.0})
    with serve(create_app(settings)) as url:
        yield url


@pytest.fixture
def sdk(proxy: str, new_sdk: Callable[..., openai.OpenAI]) -> openai.OpenAI:
    client: openai.OpenAI = new_sdk(proxy)
    return client.with_options(timeout=120)


def _raw_stream(proxy: str, **body: Any) -> list[Any]:
    """The SSE events as sent on the wire; the last one must be [DONE]."""
    request = {"model": MODEL, "messages": ASK, "stream": True, **LIMITS, **body}
    with httpx.stream("POST", proxy + "/v1/chat/completions", json=request,
                      timeout=120) as response:
        text = response.read().decode()
        assert response.status_code == 200, text
        assert response.headers["content-type"].startswith("text/event-stream")
    events = [e[len("data: "):] for e in text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("error" not in c for c in chunks), chunks
    return chunks


def _finishes(chunks: list[Any]) -> list[str]:
    return [c["finish_reason"] for chunk in chunks for c in chunk["choices"]
            if c.get("finish_reason")]


def _calls(chunks: list[Any]) -> list[dict[str, str]]:
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                slot = calls.setdefault(call["index"], {"name": "", "arguments": ""})
                fn = call.get("function") or {}
                slot["name"] = slot["name"] or fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


def _one_weather_call(calls: list[dict[str, str]]) -> None:
    assert [c["name"] for c in calls] == ["get_weather"]
    assert isinstance(json.loads(calls[0]["arguments"]), dict)


def test_streamed_request_with_tools_gets_a_proper_stream(proxy: str) -> None:
    chunks = _raw_stream(proxy, tools=[WEATHER_DESCRIBED], tool_choice="auto")
    finish = _finishes(chunks)
    assert len(finish) == 1 and finish[0] in ("tool_calls", "stop", "length")
    if finish == ["tool_calls"]:
        _one_weather_call(_calls(chunks))


@pytest.mark.parametrize("choice", ["required", NAMED], ids=["required", "named"])
def test_required_and_named_whole(sdk: openai.OpenAI, choice: Any) -> None:
    reply = sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER_DESCRIBED],
                                        tool_choice=choice, **LIMITS)
    assert reply.choices[0].finish_reason == "tool_calls"
    calls = reply.choices[0].message.tool_calls or []
    _one_weather_call([{"name": c.function.name, "arguments": c.function.arguments}
                       for c in calls if c.type == "function"])


@pytest.mark.parametrize("choice", ["required", NAMED], ids=["required", "named"])
def test_required_and_named_streamed(proxy: str, choice: Any) -> None:
    chunks = _raw_stream(proxy, tools=[WEATHER_DESCRIBED], tool_choice=choice)
    assert _finishes(chunks) == ["tool_calls"]
    _one_weather_call(_calls(chunks))


def test_tools_without_tool_choice_are_given_to_the_model(sdk: openai.OpenAI) -> None:
    # Told nothing, this server ignores tools; through toolshim the model gets them.
    reply = sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER_DESCRIBED],
                                        **LIMITS)
    assert reply.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in reply.choices[0].message.tool_calls or []
            if c.type == "function"] == ["get_weather"]


def test_full_agent_turn_with_null_content(sdk: openai.OpenAI) -> None:
    first = sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER_DESCRIBED],
                                        tool_choice="required", **LIMITS)
    turn = first.choices[0].message
    assert turn.tool_calls and turn.content is None
    history: Any = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        c.model_dump() for c in turn.tool_calls]},
        {"role": "tool", "tool_call_id": turn.tool_calls[0].id,
         "content": '{"temp_c": 18, "sky": "cloudy"}'}]
    final = sdk.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER_DESCRIBED],
                                        **LIMITS)
    assert final.choices[0].finish_reason in ("stop", "length", "tool_calls")


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tools"])
def test_include_usage_gets_a_usage_chunk(proxy: str, tools: bool) -> None:
    extra: Any = {"tools": [WEATHER_DESCRIBED], "tool_choice": "auto"} if tools else {}
    chunks = _raw_stream(proxy, stream_options={"include_usage": True}, **extra)
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usage) == 1 and chunks[-1]["choices"] == []
    assert usage[0]["completion_tokens"] > 0
    assert usage[0]["total_tokens"] == usage[0]["prompt_tokens"] + usage[0]["completion_tokens"]


def test_sdk_streaming_with_tools(sdk: openai.OpenAI) -> None:
    stream = sdk.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER_DESCRIBED],
                                         tool_choice=NAMED, stream=True, **LIMITS)
    finishes = [c.finish_reason for chunk in stream for c in chunk.choices if c.finish_reason]
    assert finishes == ["tool_calls"]


def test_unknown_model_is_404_not_another_model(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        sdk.chat.completions.create(model="no-such-model", messages=ASK, **LIMITS)
    assert info.value.code == "model_not_found"


def test_server_traceback_does_not_reach_the_client(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        sdk.chat.completions.create(model=MODEL, messages=[{"role": "wizard", "content": "hi"}],
                                    **LIMITS)
    assert "HTTP 500" in info.value.message
    assert "site-packages" not in info.value.message and ".py" not in info.value.message


def test_what_was_learned_is_in_the_file(proxy: str, caps_file: Path) -> None:
    _raw_stream(proxy, tools=[WEATHER_DESCRIBED], tool_choice="auto")
    text = caps_file.read_text()
    assert "stream_tools: false" in text and "evidence:" in text
