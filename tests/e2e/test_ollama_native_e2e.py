"""Ollama's native /api/chat through toolshim, driven by the openai SDK.

The fake (support/fake_ollama_native.py) cuts a prompt longer than its window from
the front like Ollama's runner, so these tests show tool definitions lost on /v1
and kept when toolshim sizes `num_ctx`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.capfile import learned, learned_entry
from support.fake_ollama import tool_call
from support.fake_ollama_native import BLIND_ANSWER, FakeOllamaNative, NativeReply
from support.leaving import leave_mid_stream, wait_for_cancel
from support.polling import until
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.settings import Settings

MSG: list[Any] = [{"role": "user", "content": "weather in Tokyo?"}]
AUTO = "version: 1\ndefaults:\n  num_ctx: auto\n"


USED_TOOL_39: list[Any] = [*MSG, {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "tool_39", "arguments": '{"path": "a"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "found"}]
"""a conversation that used the last tool: trimming must keep it."""


def agent_tools(count: int = 40) -> list[dict[str, Any]]:
    """An agent's tool list: ~950 characters each, like real coding-agent tools."""
    text = "Reads part of the workspace and reports what it finds, with care. " * 11
    return [{"type": "function", "function": {
        "name": f"tool_{i:02d}", "description": text,
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "a path inside the workspace"}},
            "required": ["path"]}}} for i in range(count)]


@pytest.fixture
def native() -> FakeOllamaNative:
    fake = FakeOllamaNative()
    fake.add_model("qwen3:8b")
    fake.add_model("gemma3:4b", tools=False)
    fake.add_model("small:1b", max_ctx=8192)
    return fake


@pytest.fixture
def native_url(native: FakeOllamaNative) -> Iterator[str]:
    with serve(native.app, lifespan="off") as url:
        yield url


@pytest.fixture
def start(native_url: str, caps_path: Path,
          new_sdk: Callable[..., openai.OpenAI]) -> Iterator[Callable[..., openai.OpenAI]]:
    """Start toolshim against the native fake with a capabilities text; an SDK client."""
    stack: list[Any] = []

    def run(caps: str, **settings: Any) -> openai.OpenAI:
        caps_path.write_text(caps)
        values = {"upstreams": (native_url,), "capabilities": str(caps_path),
                  "reload_interval": 0.0, **settings}
        server = serve(create_app(Settings.model_validate(values)))
        url = server.__enter__()
        stack.append(server)
        return new_sdk(url)

    yield run
    for server in reversed(stack):
        server.__exit__(None, None, None)


EXPLICIT = 'version: 1\nmodels:\n  "qwen3*":\n    num_ctx: 8192\n'


def test_streamed_answer_goes_native_with_num_ctx(start: Callable[..., openai.OpenAI],
                                                  native: FakeOllamaNative) -> None:
    native.reply("qwen3:8b", NativeReply(content=["Sunny", " in ", "Tokyo."]))
    client = start(EXPLICIT)
    with client.chat.completions.with_streaming_response.create(
            model="qwen3:8b", messages=MSG, stream=True,
            stream_options={"include_usage": True}) as raw:
        assert raw.headers["x-toolshim-num-ctx"] == "8192"
        chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Sunny in Tokyo."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and finishes.count("stop") == 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    assert chunks[-1].usage.prompt_tokens > 0
    assert native.native_requests()[-1]["options"]["num_ctx"] == 8192
    assert not native.chat_requests()


def test_whole_answer_and_sampling_options(start: Callable[..., openai.OpenAI],
                                           native: FakeOllamaNative) -> None:
    native.reply("qwen3:8b", NativeReply(content=["Forty", "-two"]))
    client = start(EXPLICIT.replace("num_ctx: 8192", "num_ctx: 8192\n    keep_alive: 10m\n"
                                    "    ollama_options: {num_gpu: 1, temperature: 0.2}"))
    done = client.chat.completions.create(model="qwen3:8b", messages=MSG, max_tokens=50,
                                          temperature=0.7, seed=3, stop="END",
                                          response_format={"type": "json_object"})
    assert done.choices[0].message.content == "Forty-two"
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens == done.usage.prompt_tokens + 5
    sent = native.native_requests()[-1]
    assert sent["stream"] is False and sent["keep_alive"] == "10m" and sent["format"] == "json"
    assert sent["options"] == {"num_gpu": 1, "temperature": 0.7, "seed": 3,
                               "num_predict": 50, "stop": ["END"], "num_ctx": 8192}


@pytest.mark.parametrize("variant", ["go", "llama_server"])
@pytest.mark.parametrize("stream", [True, False])
def test_tool_calls_both_variants(native_url: str, native: FakeOllamaNative, variant: str,
                                  stream: bool, start: Callable[..., openai.OpenAI]) -> None:
    native.variant = variant
    native.reply("qwen3:8b", NativeReply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_k3x9a0qz"),
        tool_call("get_weather", {"city": "Paris"}, "call_p4r15aaa")]))
    client = start(EXPLICIT)
    if stream:
        calls: dict[int, dict[str, str]] = {}
        finish = None
        for chunk in client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                                    tools=[WEATHER], stream=True):
            for tc in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                call = calls.setdefault(tc.index, {"id": "", "args": ""})
                call["id"] += tc.id or ""
                call["args"] += (tc.function.arguments or "") if tc.function else ""
            finish = (chunk.choices[0].finish_reason if chunk.choices else None) or finish
        got = [(calls[i]["id"], calls[i]["args"]) for i in sorted(calls)]
    else:
        done = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=[WEATHER])
        finish = done.choices[0].finish_reason
        got = [(c.id, c.function.arguments) for c in done.choices[0].message.tool_calls or []]
    assert finish == "tool_calls"
    assert [args for _, args in got] == ['{"city":"Tokyo"}', '{"city":"Paris"}']
    ids = [call_id for call_id, _ in got]
    assert len(set(ids)) == 2 and all(ids)
    if variant == "go":
        assert ids == ["call_k3x9a0qz", "call_p4r15aaa"]
    else:
        assert all(len(i) == 32 for i in ids)


def test_tool_history_and_reasoning(start: Callable[..., openai.OpenAI],
                                    native: FakeOllamaNative) -> None:
    native.reply("qwen3:8b", NativeReply(thinking=["Let me ", "think."], content=["Done."]))
    client = start(EXPLICIT)
    history: list[Any] = [
        *MSG,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_k3x9a0qz", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'}}]},
        {"role": "tool", "tool_call_id": "call_k3x9a0qz", "content": "sunny"},
        {"role": "user", "content": [
            {"type": "text", "text": "and this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]
    stream = client.chat.completions.create(model="qwen3:8b", messages=history, stream=True,
                                            tools=[WEATHER], reasoning_effort="high")
    chunks = [c for c in stream if c.choices]
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                        for c in chunks)
    assert reasoning == "Let me think."
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Done."
    sent = native.native_requests()[-1]
    assert sent["think"] == "high"
    assert sent["messages"][1]["tool_calls"] == [{"id": "call_k3x9a0qz", "function": {
        "index": 0, "name": "get_weather", "arguments": {"city": "Tokyo"}}}]
    assert sent["messages"][2] == {"role": "tool", "content": "sunny",
                                   "tool_name": "get_weather", "tool_call_id": "call_k3x9a0qz"}
    assert sent["messages"][3] == {"role": "user", "content": "and this?",
                                   "images": ["iVBORw0KGgo="]}


def test_forty_tools_are_cut_on_v1_and_kept_with_auto(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative, native_url: str,
        new_sdk: Callable[..., openai.OpenAI]) -> None:
    tools = agent_tools(40)
    call = tool_call("tool_07", {"path": "src"}, "call_a1b2c3d4")
    # Straight to Ollama's /v1: the window is the 4k default, the tools are lost.
    native.reply("qwen3:8b", NativeReply(tool_calls=[call]))
    direct = new_sdk(native_url).chat.completions.create(model="qwen3:8b", messages=MSG,
                                                         tools=tools)  # type: ignore[arg-type]
    assert direct.choices[0].message.content == BLIND_ANSWER
    assert native.truncated[-1] is True
    # Through toolshim with the shipped default `num_ctx: auto`: sized to 16k.
    client = start(AUTO)
    raw = client.chat.completions.with_raw_response.create(
        model="qwen3:8b", messages=MSG, tools=tools)  # type: ignore[arg-type]
    done = raw.parse()
    assert raw.headers["x-toolshim-num-ctx"] == "16384"
    assert [c.function.name for c in done.choices[0].message.tool_calls or []] == ["tool_07"]
    assert native.options[-1]["num_ctx"] == 16384 and native.truncated[-1] is False
    assert len(native.native_requests()[-1]["tools"]) == 40


def test_auto_leaves_a_prompt_that_fits_on_v1_until_it_raised_the_model(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative) -> None:
    client = start(AUTO)
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    assert "x-toolshim-num-ctx" not in raw.headers
    assert len(native.chat_requests()) == 1 and not native.native_requests()
    client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                   tools=agent_tools(40))  # type: ignore[arg-type]
    loads = native.loads
    # Raised once: small requests keep asking for 16k, so Ollama never reloads it down.
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    assert raw.headers["x-toolshim-num-ctx"] == "16384"
    assert native.options[-1]["num_ctx"] == 16384 and native.loads == loads
    assert len(native.chat_requests()) == 1


def test_trim_drops_unused_tools_to_fit_the_models_maximum(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative) -> None:
    native.reply("small:1b", NativeReply(content=["ok"]))
    client = start(AUTO)
    raw = client.chat.completions.with_raw_response.create(
        model="small:1b", messages=USED_TOOL_39, tools=agent_tools(40))  # type: ignore[arg-type]
    stripped = int(raw.headers["x-toolshim-tools-stripped"])
    assert raw.headers["x-toolshim-num-ctx"] == "8192"
    sent = [t["function"]["name"] for t in native.native_requests()[-1]["tools"]]
    assert 0 < len(sent) == 40 - stripped
    assert "tool_39" in sent and sent[0] == "tool_00"
    assert native.truncated[-1] is False


def test_trim_shortens_an_emulated_tool_list_too(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative) -> None:
    # Emulated tools are described in the prompt, with no `tools` left to trim: the
    # client's list is trimmed and described again.
    native.reply("small:1b", NativeReply(content=["ok"]))
    client = start(AUTO + 'models:\n  "small*":\n    tools: emulate\n')
    raw = client.chat.completions.with_raw_response.create(
        model="small:1b", messages=USED_TOOL_39, tools=agent_tools(40))  # type: ignore[arg-type]
    assert raw.headers["x-toolshim-rung"] == "emulate"
    stripped = int(raw.headers["x-toolshim-tools-stripped"])
    sent = native.native_requests()[-1]
    assert "tools" not in sent
    prompt = " ".join(str(m.get("content")) for m in sent["messages"])
    described = [f"tool_{i:02d}" for i in range(40) if f"tool_{i:02d}" in prompt]
    assert 0 < len(described) == 40 - stripped < 40
    assert "tool_39" in described and described[0] == "tool_00"
    assert native.truncated[-1] is False


def test_reject_says_how_big_and_how_small(start: Callable[..., openai.OpenAI],
                                           native: FakeOllamaNative) -> None:
    client = start(AUTO + "  context_guard: reject\n")
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="small:1b", messages=MSG,
                                       tools=agent_tools(40))  # type: ignore[arg-type]
    message = caught.value.message
    assert "8192" in message and "tokens" in message
    assert caught.value.code == "context_length_exceeded"
    assert not native.native_requests()


def test_native_refusal_is_retried_and_learned(start: Callable[..., openai.OpenAI],
                                               native: FakeOllamaNative,
                                               caps_path: Path) -> None:
    client = start('version: 1\nmodels:\n  "gemma3*":\n    num_ctx: 8192\n')
    raw = client.chat.completions.with_raw_response.create(model="gemma3:4b", messages=MSG,
                                                           tools=[WEATHER])
    assert raw.parse().choices[0].message.content == "Hello from gemma3:4b"
    assert raw.headers["x-toolshim-retries"] == "1"
    first, second = native.native_requests()
    assert first.get("tools") and not second.get("tools")
    entry = learned_entry(caps_path, "gemma3:4b", holding="tool_support")
    assert entry["tool_support"] == "refused"
    assert "does not support tools" in entry["evidence"]


def test_unknown_model_is_404_and_mid_stream_error_ends_cleanly(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative) -> None:
    client = start('version: 1\ndefaults:\n  num_ctx: 8192\n')
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="nosuch", messages=MSG)
    # An unlisted model is refused before any upstream call (never another model).
    assert caught.value.status_code == 404 and "nosuch" in caught.value.message
    assert not any(r.get("model") == "nosuch" for r in native.native_requests())
    native.reply("qwen3:8b", NativeReply(content=["a", "b", "c"], error_after=2))
    seen = ""
    with pytest.raises(openai.APIError) as failed:
        for chunk in client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                                    stream=True):
            seen += chunk.choices[0].delta.content or "" if chunk.choices else ""
    assert seen == "ab"
    assert "error was encountered" in failed.value.message


@pytest.mark.parametrize("stream", [True, False])
def test_chars_per_token_is_learned_from_prompt_eval_count(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative, caps_path: Path,
        stream: bool) -> None:
    client = start(EXPLICIT)
    answer = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=stream,
                                            tools=agent_tools(10))  # type: ignore[arg-type]
    if stream:
        list(answer)  # type: ignore[arg-type]
    ratio = learned_entry(caps_path, "qwen3:8b", holding="chars_per_token")["chars_per_token"]
    assert 3.6 < ratio < 5.0  # the fake's 4 characters a token, seen through JSON


def test_visible_on_metrics_and_admin(start: Callable[..., openai.OpenAI],
                                      native: FakeOllamaNative) -> None:
    client = start(AUTO + 'models:\n  "qwen3:8b":\n    tools: native\n')
    client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                   tools=agent_tools(40))  # type: ignore[arg-type]
    base = str(client.base_url).removesuffix("/v1/")
    metrics = httpx.get(base + "/metrics").text
    assert 'toolshim_ollama_num_ctx_total{model="qwen3:8b",num_ctx="16384"} 1.0' in metrics
    admin = httpx.get(base + "/admin/capabilities").json()
    assert admin["models"]["qwen3:8b"]["num_ctx"] == 16384


def test_non_ollama_upstreams_never_get_api_chat(start: Callable[..., openai.OpenAI],
                                                 native: FakeOllamaNative,
                                                 native_url: str) -> None:
    client = start(EXPLICIT, upstream_kinds=((native_url, "openai"),))
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    assert "x-toolshim-num-ctx" not in raw.headers
    assert native.chat_requests() and not native.native_requests()
    assert "/api/version" not in native.paths


def test_client_leaving_closes_the_native_stream(start: Callable[..., openai.OpenAI],
                                                 native: FakeOllamaNative) -> None:
    native.reply("qwen3:8b", NativeReply(content=[f"piece {i} " for i in range(50)],
                                         delay=0.05))
    base = str(start(EXPLICIT).base_url).removesuffix("/v1/")
    leave_mid_stream(base + "/v1/chat/completions",
                     {"model": "qwen3:8b", "messages": MSG, "stream": True})
    wait_for_cancel(native)
    assert native.abandoned == 1


def test_log_line_has_num_ctx(start: Callable[..., openai.OpenAI], native: FakeOllamaNative,
                              caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="toolshim"):
        client = start(AUTO)
        client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                       tools=agent_tools(40))  # type: ignore[arg-type]
        # A whole answer is reported once sent: the line may come after the client has it.
        until(lambda: _chat_lines(caplog), what="the request line")
    lines = _chat_lines(caplog)
    assert lines[-1]["num_ctx"] == 16384 and lines[-1]["context"] == "raise"


def _chat_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.record for r in caplog.records  # type: ignore[attr-defined]
            if isinstance(getattr(r, "record", None), dict)
            and r.record.get("endpoint") == "chat.completions"]  # type: ignore[attr-defined]


def test_guard_off_sends_as_is_and_null_keeps_v1(start: Callable[..., openai.OpenAI],
                                                 native: FakeOllamaNative) -> None:
    client = start(AUTO + '  context_guard: "off"\nmodels:\n  "qwen3*":\n    num_ctx: null\n')
    raw = client.chat.completions.with_raw_response.create(
        model="small:1b", messages=MSG, tools=agent_tools(40))  # type: ignore[arg-type]
    assert raw.headers["x-toolshim-num-ctx"] == "8192"
    assert "x-toolshim-tools-stripped" not in raw.headers
    assert len(native.native_requests()[-1]["tools"]) == 40 and native.truncated[-1] is True
    # num_ctx: null under models: overrides the default auto: /v1, tools cut by Ollama.
    client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                   tools=agent_tools(40))  # type: ignore[arg-type]
    assert len(native.native_requests()) == 1 and len(native.chat_requests()) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_chars_per_token_is_learned_from_a_v1_answers_usage(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative, caps_path: Path,
        stream: bool) -> None:
    """A prompt that fits keeps /v1: its usage.prompt_tokens teaches the ratio too."""
    client = start(AUTO)
    options: Any = {"stream_options": {"include_usage": True}} if stream else {}
    raw = client.chat.completions.with_raw_response.create(
        model="qwen3:8b", messages=MSG, stream=stream, tools=agent_tools(4),  # type: ignore[arg-type]
        **options)
    answer = raw.parse()
    if stream:
        list(answer)  # type: ignore[arg-type]
    assert "x-toolshim-num-ctx" not in raw.headers and not native.native_requests()
    entry = learned_entry(caps_path, "qwen3:8b", holding="chars_per_token")
    assert 3.6 < entry["chars_per_token"] < 5.0
    assert entry["evidence"].startswith("/v1 usage.prompt_tokens ")


def test_a_v1_count_that_is_small_or_cut_teaches_nothing(
        start: Callable[..., openai.OpenAI], native: FakeOllamaNative, caps_path: Path) -> None:
    # A person's ratio far too high: the estimate fits, Ollama cuts the prompt at the
    # window and counts the window, which says nothing about the tokenizer.
    client = start(AUTO + 'models:\n  "qwen3*":\n    chars_per_token: 12.0\n')
    client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                   tools=agent_tools(30))  # type: ignore[arg-type]
    assert native.truncated[-1] and not native.native_requests()
    client.chat.completions.create(model="qwen3:8b", messages=MSG)
    time.sleep(1.5)  # the keeper writes within its write gap
    assert "qwen3:8b" not in learned(caps_path)
