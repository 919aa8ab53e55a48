"""Every chat tool policy once through the Gemini door (google-genai SDK, automatic
function calling off), Google's error envelope, the door's auth, and the framing and
path parsing byte-level with raw HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from google import genai
from google.genai import types
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.servers import serve

from proxy.app import create_app

WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                                    "required": ["city"], "additionalProperties": False}}
NO_AFC = types.AutomaticFunctionCallingConfig(disable=True)
HI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def _config(**kwargs: Any) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(automatic_function_calling=NO_AFC, **kwargs)


def _tools(*extra: types.Tool) -> list[types.Tool]:
    return [types.Tool(function_declarations=[types.FunctionDeclaration.model_validate(
        {"name": WEATHER["name"], "description": WEATHER["description"],
         "parameters_json_schema": WEATHER["parametersJsonSchema"]})]), *extra]


@pytest.fixture
def new_client() -> Iterator[Callable[..., genai.Client]]:
    made: list[genai.Client] = []

    def make(url: str, api_key: str = "unused", **options: Any) -> genai.Client:
        made.append(genai.Client(api_key=api_key, http_options=types.HttpOptions(
            base_url=url, api_version="v1beta", timeout=20_000,
            retry_options=types.HttpRetryOptions(attempts=1), **options)))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def client(proxy_url: str, new_client: Callable[..., genai.Client]) -> genai.Client:
    return new_client(proxy_url)


def _generate(client: genai.Client, stream: bool, contents: Any = "hi",
              **config: Any) -> tuple[str, list[Any], Any, list[Any]]:
    """(text, function calls, finish reason, the responses) whole or streamed."""
    if stream:
        chunks = list(client.models.generate_content_stream(
            model="qwen3:8b", contents=contents, config=_config(**config)))
    else:
        chunks = [client.models.generate_content(model="qwen3:8b", contents=contents,
                                                 config=_config(**config))]
    text = "".join(p.text for c in chunks for p in c.candidates[0].content.parts or []
                   if p.text and not p.thought)  # type: ignore[index, union-attr]
    calls = [p.function_call for c in chunks for p in c.candidates[0].content.parts or []
             if p.function_call]  # type: ignore[index, union-attr]
    return text, calls, chunks[-1].candidates[0].finish_reason, chunks  # type: ignore[index]


def _sse(url: str, body: dict[str, Any], path: str = "/v1beta/models/qwen3:8b"
         ":streamGenerateContent?alt=sse") -> list[dict[str, Any]]:
    answer = httpx.post(url + path, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    frames = answer.text.split("\r\n\r\n")
    assert frames[-1] == ""  # every frame ends with its blank line
    out = []
    for frame in frames[:-1]:
        assert frame.startswith("data: ") and "\n" not in frame  # one line, no event:
        out.append(orjson.loads(frame[len("data: "):]))
    return out


# --- the chat tool policy, through this door ---------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_refusal_retried_without_tools(fake: FakeOllama, make_settings: Callable[..., Any],
                                       new_client: Callable[..., genai.Client],
                                       stream: bool) -> None:
    fake.reply("gemma3:4b", Reply(content=["no tools here"]))
    with serve(create_app(make_settings(probe=False))) as url:
        client = new_client(url)
        chunks = list(client.models.generate_content_stream(
            model="gemma3:4b", contents="hi", config=_config(tools=_tools()))) if stream else \
            [client.models.generate_content(model="gemma3:4b", contents="hi",
                                            config=_config(tools=_tools()))]
    assert "".join(c.text or "" for c in chunks) == "no tools here"
    sent = fake.chat_requests()
    assert "tools" in sent[0] and "tools" not in sent[1]


@pytest.mark.parametrize("stream", [False, True])
def test_hallucinated_call_dropped(client: genai.Client, fake: FakeOllama, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_aaaaaaaa"),
        tool_call("launch_rockets", {"count": 3}, "call_bbbbbbbb", 1)], finish="tool_calls"))
    _, calls, finish, _ = _generate(client, stream, tools=_tools())
    assert [(c.id, c.name, c.args) for c in calls] == [
        ("call_aaaaaaaa", "get_weather", {"city": "Tokyo"})]
    assert finish == types.FinishReason.STOP


@pytest.mark.parametrize("stream", [False, True])
def test_text_call_recovered(client: genai.Client, fake: FakeOllama, stream: bool) -> None:
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}' \
           '\n</tool_call>'
    fake.reply("qwen3:8b", Reply(content=[text[i:i + 7] for i in range(0, len(text), 7)]))
    said, calls, finish, _ = _generate(client, stream, tools=_tools())
    assert said.strip() == "Let me check."
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Tokyo"})]
    assert calls[0].id and finish == types.FinishReason.STOP


@pytest.mark.parametrize("stream", [False, True])
def test_broken_arguments_repaired(client: genai.Client, fake: FakeOllama, caps_path: Path,
                                   proxy_url: str, stream: bool) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    invalid_tool_calls: repair\n",
                  proxy_url)
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("get_weather", "{'city': 'Lima',}")]))
    _, calls, _, _ = _generate(client, stream, tools=_tools())
    assert [c.args for c in calls] == [{"city": "Lima"}]


def test_denied_tools_never_reach_the_model(client: genai.Client, fake: FakeOllama,
                                            caps_path: Path, proxy_url: str) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    deny_tools: [get_weather]\n",
                  proxy_url)
    _generate(client, False, tools=_tools())
    assert "tools" not in fake.chat_requests()[-1]


def test_other_tool_kinds_stripped_and_counted(proxy_url: str, fake: FakeOllama) -> None:
    answer = httpx.post(proxy_url + "/v1beta/models/qwen3:8b:generateContent", json={
        **HI, "tools": [{"functionDeclarations": [WEATHER]}, {"googleSearch": {}},
                        {"codeExecution": {}, "urlContext": {}}]})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-toolshim-tools-stripped"] == "3"
    assert [t["function"]["name"] for t in fake.chat_requests()[-1]["tools"]] == ["get_weather"]


@pytest.mark.parametrize("stream", [False, True])
def test_thoughts_shown_when_asked(client: genai.Client, fake: FakeOllama, caps_path: Path,
                                   proxy_url: str, stream: bool) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    reasoning: move\n", proxy_url)
    fake.reply("qwen3:8b", Reply(content=["<think>", "6 times 7", "</think>", "42"]))
    text, _, _, chunks = _generate(client, stream, thinking_config=types.ThinkingConfig(
        include_thoughts=True, thinking_budget=1024))
    thoughts = "".join(p.text or "" for c in chunks for p in c.candidates[0].content.parts
                       if p.thought)  # type: ignore[index, union-attr]
    assert (thoughts, text) == ("6 times 7", "42")
    assert fake.chat_requests()[-1]["reasoning_effort"] == "low"
    text, _, _, chunks = _generate(client, stream)  # not asked: not shown
    assert text == "42" and not any(p.thought for c in chunks
                                    for p in c.candidates[0].content.parts)  # type: ignore


def test_two_parallel_calls_answered_out_of_order(client: genai.Client, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Oslo"}, "call_oslo0000"),
        tool_call("get_weather", {"city": "Rome"}, "call_rome0000", 1)], finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["Both."]))
    _, calls, _, _ = _generate(client, False, tools=_tools())
    assert [c.args["city"] for c in calls] == ["Oslo", "Rome"]  # type: ignore[index]
    history = [types.Content(role="user", parts=[types.Part(text="hi")]),
               types.Content(role="model", parts=[types.Part(function_call=c) for c in calls]),
               types.Content(role="user", parts=[
                   types.Part(function_response=types.FunctionResponse(
                       id=calls[1].id, name="get_weather", response={"output": "rome: hot"})),
                   types.Part(function_response=types.FunctionResponse(
                       id=calls[0].id, name="get_weather", response={"output": "oslo: cold"}))])]
    text, _, _, _ = _generate(client, False, contents=history, tools=_tools())
    assert text == "Both."
    tools = {m["tool_call_id"]: m["content"] for m in fake.chat_requests()[-1]["messages"]
             if m["role"] == "tool"}
    assert tools == {"call_oslo0000": "oslo: cold", "call_rome0000": "rome: hot"}


def test_round_trip_without_ids(client: genai.Client, fake: FakeOllama) -> None:
    history = [types.Content(role="user", parts=[types.Part(text="hi")]),
               types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
                   name="get_weather", args={"city": "Oslo"}))]),
               types.Content(role="user", parts=[types.Part(
                   function_response=types.FunctionResponse(name="get_weather",
                                                            response={"temp": 3}))])]
    _generate(client, False, contents=history, tools=_tools())
    messages = fake.chat_requests()[-1]["messages"]
    call_id = messages[1]["tool_calls"][0]["id"]
    assert messages[2] == {"role": "tool", "tool_call_id": call_id, "content": '{"temp":3}'}


def test_function_calling_config_any_one_name(client: genai.Client, fake: FakeOllama) -> None:
    _generate(client, False, tools=_tools(), tool_config=types.ToolConfig(
        function_calling_config=types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=["get_weather"])))
    assert fake.chat_requests()[-1]["tool_choice"] == {
        "type": "function", "function": {"name": "get_weather"}}
