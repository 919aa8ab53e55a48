"""Every chat tool policy once through the Gemini door (google-genai SDK, automatic
function calling off), Google's error envelope, the door's auth, and the framing and
path parsing byte-level with raw HTTP."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from google import genai
from google.genai import errors, types
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.leaving import eventually, leave_mid_stream
from support.log_lines import request_lines
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
        options.setdefault("api_version", "v1beta")
        made.append(genai.Client(api_key=api_key, http_options=types.HttpOptions(
            base_url=url, timeout=20_000, retry_options=types.HttpRetryOptions(attempts=1),
            **options)))
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


# --- errors, in Google's envelope ----------------------------------------------------


def test_unknown_model_is_not_found(client: genai.Client) -> None:
    with pytest.raises(errors.ClientError) as info:
        client.models.generate_content(model="nosuch", contents="hi", config=_config())
    assert info.value.code == 404 and info.value.status == "NOT_FOUND"
    assert "nosuch" in (info.value.message or "")
    with pytest.raises(errors.ClientError) as info:
        client.models.get(model="nosuch")
    assert info.value.code == 404 and "nosuch" in (info.value.message or "")
    with pytest.raises(errors.ClientError) as info:  # counting says so too
        client.models.count_tokens(model="nosuch", contents="hi")
    assert info.value.code == 404 and "nosuch" in (info.value.message or "")


@pytest.mark.parametrize(("body", "field"), [
    ({}, "contents"),
    ({"contents": [{"role": "user", "parts": [{"fileData": {"fileUri": "gs://b/x.pdf"}}]}]},
     "contents[0].parts[0]"),
    ({**HI, "generationConfig": {"candidateCount": 3}}, "generationConfig.candidateCount"),
    ({**HI, "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "BLOB"}}]}]},
     "tools[0].functionDeclarations[0].parameters.type"),
])
def test_malformed_body_is_400_naming_the_field(proxy_url: str, fake: FakeOllama,
                                                body: Any, field: str) -> None:
    answer = httpx.post(proxy_url + "/v1beta/models/qwen3:8b:generateContent", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert field in error["message"]
    assert fake.chat_requests() == []  # never reached the backend


def test_not_json_and_unknown_method(proxy_url: str) -> None:
    bad = httpx.post(proxy_url + "/v1beta/models/qwen3:8b:generateContent", content=b"{nope")
    assert (bad.status_code, bad.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    for path in ("/v1beta/models/qwen3:8b:embedContent", "/v1beta/models/qwen3",
                 "/v1/models/:generateContent"):
        answer = httpx.post(proxy_url + path, json=HI)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["status"] == "NOT_FOUND"


def test_a_long_model_name_is_refused(client: genai.Client, fake: FakeOllama) -> None:
    long = "m" * 300 + "-TAIL-MARKER"
    for call in (lambda: client.models.generate_content(model=long, contents="hi",
                                                        config=_config()),
                 lambda: client.models.get(model=long)):
        with pytest.raises(errors.ClientError) as info:
            call()
        assert info.value.code == 400 and info.value.status == "INVALID_ARGUMENT"
        assert "TAIL-MARKER" not in (info.value.message or "")
    assert fake.requests == []


def test_sdk_raises_client_error_for_a_bad_request(client: genai.Client) -> None:
    with pytest.raises(errors.ClientError) as info:
        client.models.generate_content(model="qwen3:8b", contents="hi",
                                       config=_config(candidate_count=2))
    assert info.value.code == 400 and info.value.status == "INVALID_ARGUMENT"


def test_queue_full_is_resource_exhausted(make_settings: Callable[..., Any], fake: FakeOllama,
                                          new_client: Callable[..., genai.Client]) -> None:
    fake.reply("qwen3:8b", Reply(content=["slow"], delay=0.6))
    with serve(create_app(make_settings(max_concurrency=1, max_queue=0))) as url:
        first = threading.Thread(target=lambda: httpx.post(
            url + "/v1beta/models/qwen3:8b:generateContent", json=HI, timeout=10))
        first.start()
        time.sleep(0.2)
        with pytest.raises(errors.ClientError) as info:
            new_client(url).models.generate_content(model="qwen3:8b", contents="hi",
                                                    config=_config())
        first.join()
    assert info.value.code == 429 and info.value.status == "RESOURCE_EXHAUSTED"


def test_failure_mid_stream_is_an_error_chunk(proxy_url: str, fake: FakeOllama,
                                              client: genai.Client) -> None:
    fake.reply("qwen3:8b", Reply(content=["one", "two", "three"], reset_after=2, delay=0.05))
    chunks = _sse(proxy_url, HI)
    assert chunks[-1]["error"]["code"] >= 500 and chunks[-1]["error"]["status"]
    assert not any(c.get("candidates", [{}])[0].get("finishReason") for c in chunks)
    fake.reply("qwen3:8b", Reply(content=["one", "two", "three"], reset_after=2, delay=0.05))
    with pytest.raises(errors.APIError):
        list(client.models.generate_content_stream(model="qwen3:8b", contents="hi",
                                                   config=_config()))


def test_client_disconnect_closes_upstream(fake: FakeOllama, proxy_url: str) -> None:
    fake.reply("qwen3:8b", Reply(content=[f"piece {i} " for i in range(50)], delay=0.05))
    leave_mid_stream(proxy_url + "/v1beta/models/qwen3:8b:streamGenerateContent?alt=sse", HI)
    assert eventually(lambda: fake.abandoned > 0)
    assert fake.abandoned == 1


def test_logged_with_endpoint_gemini(client: genai.Client, proxy_url: str,
                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    _generate(client, False)
    _generate(client, True)
    scrape = httpx.get(proxy_url + "/metrics").text
    assert 'toolshim_requests_total{endpoint="gemini",model="qwen3:8b",status="200"} 2.0' \
        in scrape
    lines = [r for r in request_lines(caplog) if r.get("endpoint") == "gemini"]
    assert len(lines) == 2 and lines[0]["status"] == 200 and lines[0]["model"] == "qwen3:8b"


# --- auth --------------------------------------------------------------------------


def test_key_as_header_query_or_bearer_and_never_echoed(
        make_settings: Callable[..., Any], fake: FakeOllama,
        new_client: Callable[..., genai.Client], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    path = "/v1beta/models/qwen3:8b:generateContent"
    with serve(create_app(make_settings(api_keys=("sk-right",)))) as url:
        assert new_client(url, api_key="sk-right").models.generate_content(
            model="qwen3:8b", contents="hi", config=_config()).text
        assert httpx.post(url + path + "?key=sk-right", json=HI).status_code == 200
        assert httpx.post(url + path, json=HI, headers={
            "authorization": "Bearer sk-right"}).status_code == 200
        assert httpx.post(url + "/v1/models/qwen3:8b:countTokens", json=HI,
                          headers={"x-goog-api-key": "sk-right"}).status_code == 200
        with pytest.raises(errors.ClientError) as info:
            new_client(url, api_key="sk-wrong").models.generate_content(
                model="qwen3:8b", contents="hi", config=_config())
        refused = [httpx.post(url + path + "?key=sk-wrong", json=HI),
                   httpx.post(url + path, json=HI)]
        # the Gemini key forms open the Gemini door only
        other = httpx.post(url + "/v1/chat/completions", headers={"x-goog-api-key": "sk-right"},
                           json={"model": "qwen3:8b", "messages": [{"role": "user",
                                                                      "content": "x"}]})
    assert info.value.code == 401 and info.value.status == "UNAUTHENTICATED"
    for answer in refused:
        assert answer.status_code == 401 and answer.json()["error"]["status"] == \
            "UNAUTHENTICATED"
        assert "sk-" not in answer.text
    assert other.status_code == 401
    assert all("x-goog-api-key" not in {k.lower() for k in h} and "sk-right" not in str(h)
               for h in fake.headers)
    assert "sk-right" not in caplog.text and "sk-wrong" not in caplog.text
    assert all("sk-right" not in str(r) for r in fake.chat_requests())


# --- framing and paths, byte-level -----------------------------------------------------


def test_sse_framing(proxy_url: str, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["Let me ", "look."], tool_calls=[
        tool_call("get_weather", {"city": "Oslo"})], finish="tool_calls"))
    chunks = _sse(proxy_url, {**HI, "tools": [{"functionDeclarations": [WEATHER]}]})
    for chunk in chunks:
        candidate = chunk["candidates"][0]
        assert candidate["content"]["role"] == "model"
        assert candidate["content"]["parts"] or candidate.get("finishReason")
        assert chunk["modelVersion"] == "qwen3:8b" and chunk["responseId"]
    assert [c["candidates"][0].get("finishReason") for c in chunks][-1] == "STOP"
    assert "usageMetadata" in chunks[-1]
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert "".join(p.get("text", "") for p in parts) == "Let me look."
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    assert calls == [{"id": "call_k3x9a0qz", "name": "get_weather", "args": {"city": "Oslo"}}]


def test_json_array_without_alt_sse(proxy_url: str, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["one ", "two"]))
    answer = httpx.post(proxy_url + "/v1beta/models/qwen3:8b:streamGenerateContent", json=HI)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith(
        "application/json")
    chunks = orjson.loads(answer.content)
    assert isinstance(chunks, list) and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "".join(p["text"] for c in chunks for p in c["candidates"][0]["content"]["parts"]) \
        == "one two"


@pytest.mark.parametrize("path", [
    "/v1beta/models/qwen3:8b:generateContent",
    "/v1beta/models/qwen3:8b%3AgenerateContent",
    "/v1beta/models/qwen3%3A8b%3AgenerateContent",
    "/v1/models/qwen3:8b:generateContent",
    "/v1beta/models/models/qwen3:8b:generateContent"])
def test_the_model_is_everything_up_to_the_last_colon(proxy_url: str, fake: FakeOllama,
                                                     path: str) -> None:
    answer = httpx.post(proxy_url + path, json=HI)
    assert answer.status_code == 200, answer.text
    assert fake.chat_requests()[-1]["model"] == "qwen3:8b"
    assert answer.json()["modelVersion"] == "qwen3:8b"


def test_models_listing_in_gemini_shape(proxy_url: str, client: genai.Client,
                                        new_client: Callable[..., genai.Client]) -> None:
    names = [m.name for m in client.models.list()]
    assert "models/qwen3:8b" in names
    one = client.models.get(model="qwen3:8b")
    assert one.name == "models/qwen3:8b"
    assert "generateContent" in (one.supported_actions or [])
    under_v1 = new_client(proxy_url, api_version="v1")
    assert "models/qwen3:8b" in [m.name for m in under_v1.models.list()]
    # OpenAI clients still get OpenAI's listing on the path both APIs share
    openai_shape = httpx.get(proxy_url + "/v1/models").json()
    assert openai_shape["object"] == "list" and "models" not in openai_shape


def test_a_hostile_body_is_a_400_never_a_crash(proxy_url: str, fake: FakeOllama) -> None:
    # a Schema nested past any sane depth (written by hand: orjson stops at 255 levels)
    deep = b'{"type":"OBJECT","properties":{"a":' * 5000 + b'{"type":"STRING"}' + b"}}" * 5000
    tools = b'{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[' \
        b'{"name":"f","parameters":' + deep + b"}]}]}"
    for body in (tools, orjson.dumps({"contents": [{"parts": [{"text": "x"}]}, [[[[]]]]]}),
                 b"[1, 2, 3]", b'"contents"'):
        answer = httpx.post(proxy_url + "/v1beta/models/qwen3:8b:generateContent",
                            content=body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert fake.chat_requests() == []
    assert httpx.get(proxy_url + "/healthz").status_code == 200


def test_a_cross_site_post_is_refused_in_googles_envelope(proxy_url: str,
                                                          fake: FakeOllama) -> None:
    # A web page in the user's browser must not act through this door either.
    answer = httpx.post(proxy_url + "/v1beta/models/qwen3:8b:generateContent", json=HI,
                        headers={"origin": "https://evil.example",
                                 "sec-fetch-site": "cross-site"})
    assert answer.status_code == 403
    assert answer.json()["error"]["status"] == "PERMISSION_DENIED"
    assert fake.chat_requests() == []
