"""/v1/messages end to end through the real `anthropic` SDK, against the fake Ollama.

The chat flow answers a Messages request exactly as it answers chat, so each chat
tool policy is driven once through this door; the framing is checked byte-level
with raw HTTP as well (event names, block order, no `[DONE]`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.leaving import eventually, leave_mid_stream
from support.log_lines import request_lines
from support.servers import serve

from proxy.app import create_app

WEATHER: Any = {"name": "get_weather", "description": "Weather for a city",
                "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                 "type": "object",
                                 "properties": {"city": {"type": "string"}},
                                 "required": ["city"], "additionalProperties": False},
                "cache_control": {"type": "ephemeral"}, "strict": True,
                "eager_input_streaming": True}
HI: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture
def new_claude() -> Iterator[Callable[..., anthropic.Anthropic]]:
    made: list[anthropic.Anthropic] = []

    def make(url: str, **kwargs: Any) -> anthropic.Anthropic:
        kwargs.setdefault("api_key", "unused")
        made.append(anthropic.Anthropic(base_url=url, max_retries=0, timeout=20, **kwargs))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def claude(proxy_url: str, new_claude: Callable[..., anthropic.Anthropic]
           ) -> anthropic.Anthropic:
    return new_claude(proxy_url)


def _sse(proxy_url: str, body: dict[str, Any], path: str = "/v1/messages?beta=true"
         ) -> list[tuple[str, dict[str, Any]]]:
    """The stream as (event name, data) pairs, read byte-level."""
    answer = httpx.post(proxy_url + path, json=body, headers={
        "anthropic-version": "2023-06-01", "anthropic-beta": "whatever-2099-01-01,x"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    pairs = []
    for frame in answer.text.split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        pairs.append((lines["event"], orjson.loads(lines["data"])))
    return pairs


def _assert_framed(pairs: list[tuple[str, dict[str, Any]]]) -> None:
    """Names equal types; every delta's block was started and not yet stopped."""
    assert all(name == data["type"] for name, data in pairs)
    open_blocks: set[int] = set()
    for name, data in pairs:
        if name == "content_block_start":
            assert data["index"] not in open_blocks and not open_blocks
            open_blocks.add(data["index"])
        elif name == "content_block_delta":
            assert data["index"] in open_blocks
        elif name == "content_block_stop":
            open_blocks.remove(data["index"])
    assert not open_blocks


# --- the SDK ------------------------------------------------------------------


def test_create_whole(claude: anthropic.Anthropic, fake: FakeOllama) -> None:
    done = claude.messages.create(model="qwen3:8b", max_tokens=100, messages=HI,
                                  system=[{"type": "text", "text": "Be brief.",
                                           "cache_control": {"type": "ephemeral"}}],
                                  metadata={"user_id": "u1"}, stop_sequences=["END"])
    assert done.type == "message" and done.id.startswith("msg_") and done.role == "assistant"
    assert done.model == "qwen3:8b" and done.stop_reason == "end_turn"
    assert [b.type for b in done.content] == ["text"]
    assert done.content[0].text == "Hello from qwen3:8b"  # type: ignore[union-attr]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (12, 5)
    sent = fake.chat_requests()[-1]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hi"}]
    assert (sent["max_tokens"], sent["stop"]) == (100, ["END"])
    assert "metadata" not in sent and "cache_control" not in orjson.dumps(sent).decode()


def test_stream_accumulates(claude: anthropic.Anthropic, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["one ", "two ", "three"]))
    with claude.messages.stream(model="qwen3:8b", max_tokens=100, messages=HI) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "one two three"
    assert final.content[0].text == "one two three"  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 5


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_round_trip(claude: anthropic.Anthropic, fake: FakeOllama,
                             stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["Checking."], tool_calls=[
        tool_call("get_weather", {"city": "Paris"}, "call_k3x9a0qz")]))
    fake.reply("qwen3:8b", Reply(content=["It is 18C in Paris."]))
    first = _message(claude, stream, model="qwen3:8b", max_tokens=200, tools=[WEATHER],
                     messages=[{"role": "user", "content": "weather in Paris?"}],
                     tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert [b.type for b in first.content] == ["text", "tool_use"]
    call = first.content[1]
    assert call.type == "tool_use" and call.id.startswith("toolu_")
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})
    assert first.stop_reason == "tool_use"
    second = _message(claude, stream, model="qwen3:8b", max_tokens=200, tools=[WEATHER],
                      messages=[{"role": "user", "content": "weather in Paris?"},
                                {"role": "assistant", "content": first.content},
                                {"role": "user", "content": [
                                    {"type": "tool_result", "tool_use_id": call.id,
                                     "content": [{"type": "text", "text": "18C"}]},
                                    {"type": "text", "text": "thanks"}]}])
    assert second.content[0].text == "It is 18C in Paris."  # type: ignore[union-attr]
    sent = fake.chat_requests()
    assert sent[0]["tools"][0]["function"]["name"] == "get_weather"
    assert sent[0]["tool_choice"] == "auto" and sent[0]["parallel_tool_calls"] is False
    history = sent[1]["messages"]
    assert history[1]["tool_calls"][0]["id"] == call.id
    assert history[1]["tool_calls"][0]["function"]["arguments"] == '{"city":"Paris"}'
    assert history[2] == {"role": "tool", "tool_call_id": call.id, "content": "18C"}
    assert history[3] == {"role": "user", "content": "thanks"}


def _message(claude: anthropic.Anthropic, stream: bool, **kwargs: Any) -> Any:
    if not stream:
        return claude.messages.create(**kwargs)
    with claude.messages.stream(**kwargs) as events:
        return events.get_final_message()


@pytest.mark.parametrize("stream", [False, True])
def test_thinking(claude: anthropic.Anthropic, fake: FakeOllama, caps_path: Path,
                  proxy_url: str, stream: bool) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    reasoning: move\n", proxy_url)
    fake.reply("qwen3:8b", Reply(content=["<think>", "6 times 7", "</think>", "42"]))
    done = _message(claude, stream, model="qwen3:8b", max_tokens=2000, messages=[
        {"role": "user", "content": "6*7?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "old", "signature": "abc"},
            {"type": "redacted_thinking", "data": "xyz"}, {"type": "text", "text": "ok"}]},
        {"role": "user", "content": "again"}],
        thinking={"type": "enabled", "budget_tokens": 1024})
    assert [b.type for b in done.content] == ["thinking", "text"]
    assert done.content[0].thinking == "6 times 7" and done.content[0].signature
    assert done.content[1].text == "42"
    sent = fake.chat_requests()[-1]
    assert sent["reasoning_effort"] == "low"
    assert sent["messages"][1] == {"role": "assistant", "content": "ok"}


def test_thinking_not_asked_for_is_not_shown(claude: anthropic.Anthropic, fake: FakeOllama,
                                             caps_path: Path, proxy_url: str) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    reasoning: move\n", proxy_url)
    fake.reply("qwen3:8b", Reply(content=["<think>", "hmm", "</think>", "42"]))
    done = claude.messages.create(model="qwen3:8b", max_tokens=100, messages=HI)
    assert [b.type for b in done.content] == ["text"]


# --- framing, byte-level --------------------------------------------------------------


def test_stream_framing(proxy_url: str, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["Let me look."], tool_calls=[
        tool_call("get_weather", {"city": "Oslo"})]))
    pairs = _sse(proxy_url, {"model": "qwen3:8b", "max_tokens": 50, "stream": True,
                             "tools": [WEATHER], "messages": HI})
    _assert_framed(pairs)
    names = [n for n, _ in pairs]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    start = pairs[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0
    blocks = [d["content_block"] for n, d in pairs if n == "content_block_start"]
    assert [b["type"] for b in blocks] == ["text", "tool_use"]
    assert blocks[1]["input"] == {} and blocks[1]["name"] == "get_weather"
    json_parts = [d["delta"]["partial_json"] for n, d in pairs
                  if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"]
    assert orjson.loads("".join(json_parts)) == {"city": "Oslo"}
    delta = pairs[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == 5
    assert b"[DONE]" not in orjson.dumps(pairs)


def test_thinking_stream_has_signature_before_stop(proxy_url: str, fake: FakeOllama,
                                                   caps_path: Path) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    reasoning: move\n", proxy_url)
    fake.reply("qwen3:8b", Reply(content=["<think>", "hm", "</think>", "ok"]))
    pairs = _sse(proxy_url, {"model": "qwen3:8b", "max_tokens": 50, "stream": True,
                             "thinking": {"type": "adaptive"}, "messages": HI})
    _assert_framed(pairs)
    kinds = [(n, d.get("delta", {}).get("type")) for n, d in pairs]
    at = kinds.index(("content_block_delta", "signature_delta"))
    assert kinds[at - 1] == ("content_block_delta", "thinking_delta")
    assert kinds[at + 1] == ("content_block_stop", None)
    assert "reasoning_effort" not in fake.chat_requests()[-1]  # adaptive: the model decides


def test_length_stop_is_max_tokens(claude: anthropic.Anthropic, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["cut"], finish="length"))
    assert claude.messages.create(model="qwen3:8b", max_tokens=1, messages=HI
                                  ).stop_reason == "max_tokens"


def test_root_and_head_answer(proxy_url: str) -> None:
    assert httpx.head(proxy_url + "/").status_code == 200
    assert httpx.get(proxy_url + "/").json()["status"] == "ok"


def test_count_tokens(claude: anthropic.Anthropic, fake: FakeOllama) -> None:
    short = claude.messages.count_tokens(model="qwen3:8b", messages=HI)
    long = claude.messages.count_tokens(model="qwen3:8b", tools=[WEATHER], messages=[
        {"role": "user", "content": "word " * 400}])
    assert 0 < short.input_tokens < long.input_tokens
    assert long.input_tokens >= 2000 / 3.2  # the default ratio, erring large
    assert fake.chat_requests() == []  # the model never ran


# --- the chat tool policy, through this door ---------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_refusal_retried_without_tools(fake: FakeOllama, make_settings: Callable[..., Any],
                                       new_claude: Callable[..., anthropic.Anthropic],
                                       stream: bool) -> None:
    fake.reply("gemma3:4b", Reply(content=["no tools here"]))
    with serve(create_app(make_settings(probe=False))) as url:
        done = _message(new_claude(url), stream, model="gemma3:4b", max_tokens=50,
                        tools=[WEATHER], messages=HI)
    assert done.content[0].text == "no tools here"
    sent = fake.chat_requests()
    assert "tools" in sent[0] and "tools" not in sent[1]


@pytest.mark.parametrize("stream", [False, True])
def test_hallucinated_call_dropped(claude: anthropic.Anthropic, fake: FakeOllama,
                                   stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_aaaaaaaa"),
        tool_call("launch_rockets", {"count": 3}, "call_bbbbbbbb", 1)]))
    done = _message(claude, stream, model="qwen3:8b", max_tokens=50, tools=[WEATHER],
                    messages=HI)
    assert [(b.type, b.name) for b in done.content] == [("tool_use", "get_weather")]


@pytest.mark.parametrize("stream", [False, True])
def test_text_call_recovered(claude: anthropic.Anthropic, fake: FakeOllama,
                             stream: bool) -> None:
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}' \
           '\n</tool_call>'
    fake.reply("qwen3:8b", Reply(content=[text[i:i + 7] for i in range(0, len(text), 7)]))
    done = _message(claude, stream, model="qwen3:8b", max_tokens=50, tools=[WEATHER],
                    messages=HI)
    assert [b.type for b in done.content] == ["text", "tool_use"]
    assert done.content[0].text.strip() == "Let me check."
    assert done.content[1].input == {"city": "Tokyo"} and done.stop_reason == "tool_use"


@pytest.mark.parametrize("stream", [False, True])
def test_broken_arguments_repaired(claude: anthropic.Anthropic, fake: FakeOllama,
                                   caps_path: Path, proxy_url: str, stream: bool) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    invalid_tool_calls: repair\n",
                  proxy_url)
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", "{'city': 'Lima',}")]))
    done = _message(claude, stream, model="qwen3:8b", max_tokens=50, tools=[WEATHER],
                    messages=HI)
    assert [(b.type, b.input) for b in done.content] == [("tool_use", {"city": "Lima"})]


def test_hosted_tools_stripped_and_counted(claude: anthropic.Anthropic,
                                           fake: FakeOllama) -> None:
    raw = claude.messages.with_raw_response.create(
        model="qwen3:8b", max_tokens=50, messages=HI, tools=[
            WEATHER, {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
            {"type": "bash_20250124", "name": "bash"}])
    assert raw.headers["x-toolshim-tools-stripped"] == "2"
    assert [t["function"]["name"] for t in fake.chat_requests()[-1]["tools"]] == ["get_weather"]


@pytest.mark.parametrize(("choice", "sent"), [
    ({"type": "any"}, "required"),
    ({"type": "tool", "name": "get_weather"},
     {"type": "function", "function": {"name": "get_weather"}}),
    ({"type": "none"}, "none")])
def test_tool_choice(claude: anthropic.Anthropic, fake: FakeOllama, choice: Any,
                     sent: Any) -> None:
    claude.messages.create(model="qwen3:8b", max_tokens=50, messages=HI, tools=[WEATHER],
                           tool_choice=choice)
    assert fake.chat_requests()[-1]["tool_choice"] == sent


# --- errors ----------------------------------------------------------------------------


def test_unknown_model_is_not_found(claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as info:
        claude.messages.create(model="nosuch", max_tokens=5, messages=HI)
    body = info.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert "nosuch" in body["error"]["message"] and body["request_id"]
    assert info.value.response.headers["request-id"] == body["request_id"]
    with pytest.raises(anthropic.NotFoundError) as info:  # counting says so too
        claude.messages.count_tokens(model="nosuch", messages=HI)
    assert info.value.body["error"]["type"] == "not_found_error"
    assert "nosuch" in info.value.body["error"]["message"]


@pytest.mark.parametrize(("body", "field"), [
    ({"model": "qwen3:8b", "messages": HI}, "max_tokens"),
    ({"model": "qwen3:8b", "max_tokens": 5}, "messages"),
    ({"model": "qwen3:8b", "max_tokens": 5, "messages": [{"role": "wizard", "content": "x"}]},
     "messages.0.role"),
    ({"model": "qwen3:8b", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "tool_result"}]}]}, "messages.0.content.0.tool_use_id"),
    ({"model": "qwen3:8b", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": "JVBERi0="}}]}]}, "messages.0.content.0"),
    ({"model": "qwen3:8b", "max_tokens": 5, "messages": HI, "tools": [{"name": "x"}]},
     "tools.0.input_schema"),
    ({"model": "qwen3:8b", "max_tokens": 5, "messages": HI, "tool_choice": {"type": "some"}},
     "tool_choice.type"),
    ({"model": "qwen3:8b", "max_tokens": 5, "messages": HI, "stream": "false"}, "stream"),
])
def test_malformed_body_is_400_naming_the_field(proxy_url: str, fake: FakeOllama,
                                                body: Any, field: str) -> None:
    answer = httpx.post(proxy_url + "/v1/messages", json=body)
    assert answer.status_code == 400
    data = answer.json()
    assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    assert data["error"]["message"].startswith(field + ":")
    assert fake.chat_requests() == []  # never reached the backend


def test_sdk_raises_bad_request(claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(model="qwen3:8b", max_tokens=0, messages=HI)


def test_x_api_key_and_bearer_accepted(make_settings: Callable[..., Any], fake: FakeOllama,
                                       new_claude: Callable[..., anthropic.Anthropic]) -> None:
    with serve(create_app(make_settings(api_keys=("sk-right",)))) as url:
        # Claude Code sends ANTHROPIC_API_KEY as x-api-key (this SDK sends api_key as Bearer)
        raw = httpx.post(url + "/v1/messages?beta=true", headers={"x-api-key": "sk-right"},
                         json={"model": "qwen3:8b", "max_tokens": 5, "messages": HI})
        assert raw.status_code == 200, raw.text
        assert new_claude(url, api_key="sk-right").messages.create(
            model="qwen3:8b", max_tokens=5, messages=HI).content
        assert new_claude(url, api_key=None, auth_token="sk-right").messages.count_tokens(
            model="qwen3:8b", messages=HI).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError) as info:
            new_claude(url, api_key="sk-wrong").messages.create(
                model="qwen3:8b", max_tokens=5, messages=HI)
        # x-api-key opens this door only
        other = httpx.get(url + "/v1/models", headers={"x-api-key": "sk-right"})
    body = info.value.body
    assert body["error"]["type"] == "authentication_error"
    assert "sk-" not in orjson.dumps(body).decode()
    assert other.status_code == 401
    # toolshim's key is toolshim's: the backend never sees it
    assert all("x-api-key" not in h and "sk-right" not in str(h) for h in fake.headers)


def test_queue_full_is_rate_limit_error(make_settings: Callable[..., Any], fake: FakeOllama,
                                        new_claude: Callable[..., anthropic.Anthropic]) -> None:
    import threading

    fake.reply("qwen3:8b", Reply(content=["slow"], delay=0.6))
    with serve(create_app(make_settings(max_concurrency=1, max_queue=0))) as url:
        first = threading.Thread(target=lambda: httpx.post(url + "/v1/messages", json={
            "model": "qwen3:8b", "max_tokens": 5, "messages": HI}, timeout=10))
        first.start()
        time.sleep(0.2)
        with pytest.raises(anthropic.RateLimitError) as info:
            new_claude(url).messages.create(model="qwen3:8b", max_tokens=5, messages=HI)
        first.join()
    assert info.value.body["error"]["type"] == "rate_limit_error"


def test_failure_mid_stream_is_an_error_event(proxy_url: str, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["one", "two", "three"], reset_after=2, delay=0.05))
    pairs = _sse(proxy_url, {"model": "qwen3:8b", "max_tokens": 5, "stream": True,
                             "messages": HI})
    assert pairs[-1][0] == "error" and pairs[-1][1]["error"]["type"] == "api_error"
    assert "message_stop" not in [n for n, _ in pairs]


def test_client_disconnect_closes_upstream(fake: FakeOllama, proxy_url: str) -> None:
    fake.reply("qwen3:8b", Reply(content=[f"piece {i} " for i in range(50)], delay=0.05))
    leave_mid_stream(proxy_url + "/v1/messages",
                     {"model": "qwen3:8b", "max_tokens": 5, "stream": True, "messages": HI})
    assert eventually(lambda: fake.abandoned > 0)
    assert fake.abandoned == 1


def test_logged_with_endpoint_messages(claude: anthropic.Anthropic, proxy_url: str,
                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    claude.messages.create(model="qwen3:8b", max_tokens=5, messages=HI)
    with claude.messages.stream(model="qwen3:8b", max_tokens=5, messages=HI) as stream:
        stream.get_final_message()
    scrape = httpx.get(proxy_url + "/metrics").text
    assert 'toolshim_requests_total{endpoint="messages",model="qwen3:8b",status="200"} 2.0' \
        in scrape
    lines = [r for r in request_lines(caplog) if r.get("endpoint") == "messages"]
    assert len(lines) == 2 and lines[0]["status"] == 200 and lines[0]["model"] == "qwen3:8b"


# --- aliases -----------------------------------------------------------------------------


def test_alias_serves_claude_names(fake: FakeOllama, caps_path: Path,
                                   make_settings: Callable[..., Any],
                                   new_claude: Callable[..., anthropic.Anthropic],
                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    caps_path.write_text('version: 1\naliases:\n  "claude-*": "qwen3:8b"\n'
                         '  "Claude-Haiku-*": "gemma3:4b"\n')
    with serve(create_app(make_settings())) as url:
        raw = new_claude(url).messages.with_raw_response.create(
            model="claude-sonnet-9-1", max_tokens=5, messages=HI)
        haiku = new_claude(url).messages.create(model="claude-haiku-9-1", max_tokens=5,
                                                messages=HI)
        listed = httpx.get(url + "/v1/models").json()["data"]
    assert raw.headers["x-toolshim-model"] == "qwen3:8b"
    assert raw.parse().model == "claude-sonnet-9-1"  # the name the client asked for
    assert haiku.content[0].text == "Hello from gemma3:4b"  # the most specific glob
    assert [r["model"] for r in fake.chat_requests()] == ["qwen3:8b", "gemma3:4b"]
    line = next(r for r in request_lines(caplog) if r.get("endpoint") == "messages")
    assert (line["model"], line["alias"]) == ("qwen3:8b", "claude-sonnet-9-1")
    aliases = {m["id"]: m["toolshim"]["alias_for"] for m in listed if "alias_for" in
               m.get("toolshim", {})}
    assert aliases == {"claude-*": "qwen3:8b", "Claude-Haiku-*": "gemma3:4b"}


# --- a backend silent before its answer (a model loading) -------------------------------


@pytest.fixture
def quick_pings(monkeypatch: pytest.MonkeyPatch) -> None:
    from proxy.api.messages import waiting

    monkeypatch.setattr(waiting, "PING_AFTER", 0.2)
    monkeypatch.setattr(waiting, "PING_EVERY", 0.2)


def test_pings_while_the_model_loads(proxy_url: str, fake: FakeOllama, quick_pings: None,
                                     claude: anthropic.Anthropic) -> None:
    fake.reply("qwen3:8b", Reply(content=["loaded ", "now"], load=0.7))
    pairs = _sse(proxy_url, {"model": "qwen3:8b", "max_tokens": 5, "stream": True,
                             "messages": HI})
    _assert_framed(pairs)
    names = [n for n, _ in pairs]
    assert names[:2] == ["message_start", "ping"] and names.count("ping") >= 2
    assert names[-1] == "message_stop"
    assert "".join(d["delta"]["text"] for n, d in pairs if n == "content_block_delta") == \
        "loaded now"
    with claude.messages.stream(model="qwen3:8b", max_tokens=5, messages=HI) as stream:
        assert stream.get_final_message().content[0].text == "loaded now"


def test_an_error_after_the_pings_is_an_error_event(proxy_url: str, fake: FakeOllama,
                                                    quick_pings: None) -> None:
    fake.reply("qwen3:8b", Reply(load=0.5, status=500, body=b'{"error":{"message":'
                                 b'"model failed to load","type":"api_error"}}'))
    pairs = _sse(proxy_url, {"model": "qwen3:8b", "max_tokens": 5, "stream": True,
                             "messages": HI})
    assert [n for n, _ in pairs][:2] == ["message_start", "ping"]
    assert pairs[-1] == ("error", {"type": "error", "error": {
        "type": "api_error", "message": "model failed to load"}})


def test_client_leaving_while_the_model_loads_frees_the_upstream(
        proxy_url: str, fake: FakeOllama, quick_pings: None,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    fake.reply("qwen3:8b", Reply(content=["late"], load=1.5))
    with httpx.stream("POST", proxy_url + "/v1/messages", json={
            "model": "qwen3:8b", "max_tokens": 5, "stream": True, "messages": HI}) as response:
        for line in response.iter_lines():
            if "ping" in line:
                break
    deadline = time.monotonic() + 3
    while not request_lines(caplog) and time.monotonic() < deadline:
        time.sleep(0.02)
    lines = [r for r in request_lines(caplog) if r.get("endpoint") == "messages"]
    assert len(lines) == 1 and lines[0]["status"] == 499
