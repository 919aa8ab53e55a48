"""The Gemini API door end to end through the real `google-genai` SDK, against the
fake Ollama (automatic function calling off: the test plays the client's tool loop).

The chat flow answers a generateContent request exactly as it answers chat, so each
chat tool policy is driven once through this door; the framing and the path parsing
are checked byte-level with raw HTTP as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.tools import WEATHER_PARAMETERS

# Through the SDK's typed Schema (`parameters`, Gemini's OpenAPI subset), not the JSON
# schema of support.tools.WEATHER_GEMINI: that translation is what this file tests.
WEATHER_TYPED = types.FunctionDeclaration(
    name="get_weather", description="Weather for a city",
    parameters=types.Schema(type=types.Type.OBJECT,
                            properties={"city": types.Schema(type=types.Type.STRING)},
                            required=["city"]))
NO_AFC = types.AutomaticFunctionCallingConfig(disable=True)


def config(**kwargs: Any) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(automatic_function_calling=NO_AFC, **kwargs)


@pytest.fixture
def gemini(proxy_url: str) -> Iterator[genai.Client]:
    client = genai.Client(api_key="unused", http_options=types.HttpOptions(
        base_url=proxy_url, timeout=20_000, retry_options=types.HttpRetryOptions(attempts=1)))
    yield client
    client.close()


@pytest.fixture
def beta(proxy_url: str) -> Iterator[genai.Client]:
    """The client as Gemini CLI configures it: /v1beta/."""
    client = genai.Client(api_key="unused", http_options=types.HttpOptions(
        base_url=proxy_url, api_version="v1beta", timeout=20_000,
        retry_options=types.HttpRetryOptions(attempts=1)))
    yield client
    client.close()


def test_generate_content(gemini: genai.Client, fake: FakeOllama) -> None:
    answer = gemini.models.generate_content(
        model="qwen3:8b", contents="hi",
        config=config(system_instruction="Be brief.", temperature=0.2, top_p=0.9, top_k=40,
                      max_output_tokens=100, stop_sequences=["END"], seed=7))
    assert answer.text == "Hello from qwen3:8b"
    assert answer.candidates and answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata is not None
    assert answer.usage_metadata.prompt_token_count == 12
    assert answer.usage_metadata.candidates_token_count == 5
    assert answer.usage_metadata.total_token_count == 17
    assert answer.model_version == "qwen3:8b"
    sent = fake.chat_requests()[-1]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hi"}]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["stop"],
            sent["seed"]) == (0.2, 0.9, 100, ["END"], 7)


@pytest.mark.parametrize("api", ["v1", "v1beta"])
def test_stream(proxy_url: str, fake: FakeOllama, api: str) -> None:
    fake.reply("qwen3:8b", Reply(content=["one ", "two ", "three"]))
    with genai.Client(api_key="unused", http_options=types.HttpOptions(
            base_url=proxy_url, api_version=api, timeout=20_000)) as client:
        chunks = list(client.models.generate_content_stream(model="qwen3:8b",
                                                            contents="hi", config=config()))
    assert "".join(c.text or "" for c in chunks) == "one two three"
    last = chunks[-1]
    assert last.candidates and last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata and last.usage_metadata.candidates_token_count == 5
    for chunk in chunks:
        assert chunk.candidates
        assert chunk.candidates[0].content and chunk.candidates[0].content.parts or \
            chunk.candidates[0].finish_reason


def test_count_tokens(gemini: genai.Client, fake: FakeOllama) -> None:
    before = len(fake.chat_requests())
    counted = gemini.models.count_tokens(model="qwen3:8b", contents="hello there " * 50)
    assert counted.total_tokens and counted.total_tokens > 100
    assert len(fake.chat_requests()) == before  # no model run


def test_count_tokens_and_model_through_an_alias(gemini: genai.Client, fake: FakeOllama,
                                                 caps_path: Path, proxy_url: str) -> None:
    """Gemini CLI asks for `gemini-2.5-pro`: mapped to a local model, the count is that
    model's (its characters per token) and its entry describes it."""
    prompt = "hello there " * 50
    default = gemini.models.count_tokens(model="qwen3:8b", contents=prompt).total_tokens
    edit_and_wait(caps_path, 'version: 1\naliases:\n  "gemini-*": "qwen3:8b"\n'
                  '  "gemini-9-*": "nowhere:1b"\nmodels:\n  "qwen3*":\n'
                  '    chars_per_token: 1\n', proxy_url)
    local = gemini.models.count_tokens(model="qwen3:8b", contents=prompt).total_tokens
    aliased = gemini.models.count_tokens(model="gemini-2.5-pro", contents=prompt).total_tokens
    assert default and local and local > 2 * default  # the profile's ratio counts
    assert aliased == local
    entry = gemini.models.get(model="gemini-2.5-pro")
    assert entry.name == "models/gemini-2.5-pro"  # the name the client asked for
    assert entry.display_name == "qwen3:8b"
    assert entry.description and "qwen3:8b" in entry.description
    with pytest.raises(genai.errors.ClientError) as missing:
        gemini.models.get(model="gemini-9-x")
    assert missing.value.code == 404 and "nowhere:1b" in str(missing.value)
    assert fake.chat_requests() == []  # no model run


@pytest.mark.parametrize("stream", [False, True])
def test_function_call_round_trip(beta: genai.Client, fake: FakeOllama, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("get_weather", {"city": "Paris"})],
                                 finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["Sunny."]))
    tools = [types.Tool(function_declarations=[WEATHER_TYPED])]
    if stream:
        chunks = list(beta.models.generate_content_stream(
            model="qwen3:8b", contents="weather in Paris?", config=config(tools=tools)))
        calls = [c for chunk in chunks for c in chunk.function_calls or []]
        finish = chunks[-1].candidates[0].finish_reason  # type: ignore[index]
    else:
        answer = beta.models.generate_content(model="qwen3:8b", contents="weather in Paris?",
                                              config=config(tools=tools))
        calls = answer.function_calls or []
        finish = answer.candidates[0].finish_reason  # type: ignore[index]
    assert finish == types.FinishReason.STOP
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert calls[0].id
    sent = fake.chat_requests()[-1]
    assert sent["tools"][0]["function"]["parameters"] == WEATHER_PARAMETERS
    history = [types.Content(role="user", parts=[types.Part(text="weather in Paris?")]),
               types.Content(role="model", parts=[types.Part(function_call=calls[0])]),
               types.Content(role="user", parts=[types.Part.from_function_response(
                   name="get_weather", response={"output": "sunny, 21C"})])]
    answer = beta.models.generate_content(model="qwen3:8b", contents=history,
                                          config=config(tools=tools))
    assert answer.text == "Sunny."
    sent = fake.chat_requests()[-1]
    assert sent["messages"][1]["tool_calls"][0]["id"] == calls[0].id
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": calls[0].id,
                                   "content": "sunny, 21C"}
