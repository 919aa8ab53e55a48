"""Tool calling end to end: checks, recovery, emulation, through the openai SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from support.capfile import learned_entry
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.tools import READ_FILE, WEATHER_CLOSED

TOOLS: list[Any] = [WEATHER_CLOSED, READ_FILE]
MSG: list[Any] = [{"role": "user", "content": "weather in Tokyo?"}]


def _streamed_calls(stream: Any) -> tuple[dict[int, dict[str, str]], str | None, str]:
    """Assemble tool calls the way SDK users do: by index, ids/names once, args appended."""
    calls: dict[int, dict[str, str]] = {}
    finish, text = None, ""
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        for tc in choice.delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            if tc.id:
                assert not call["id"], "id sent twice for one call"
                call["id"] = tc.id
            if tc.function and tc.function.name:
                assert not call["name"], "name sent twice for one call"
                call["name"] = tc.function.name
            if tc.function and tc.function.arguments:
                call["arguments"] += tc.function.arguments
        finish = choice.finish_reason or finish
    return calls, finish, text


def test_valid_call_passes_and_hallucinated_one_is_dropped(fake: FakeOllama,
                                                           client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_aaaaaaaa"),
        tool_call("launch_rockets", {"count": 3}, "call_bbbbbbbb")]))
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG,
                                                           tools=TOOLS)
    done = raw.parse()
    calls = done.choices[0].message.tool_calls or []
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        ("get_weather", '{"city":"Tokyo"}')]
    assert done.choices[0].finish_reason == "tool_calls"
    assert raw.headers["x-toolshim-calls-dropped"] == "1"


@pytest.mark.parametrize("stream", [False, True])
def test_all_invalid_calls_end_as_stop(fake: FakeOllama, client: openai.OpenAI,
                                       stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", '{"city": "Tok', "call_aaaaaaaa"),          # broken JSON
        tool_call("get_weather", {"town": "Tokyo"}, "call_bbbbbbbb"),        # schema-invalid
        tool_call("rm_rf", {}, "call_cccccccc")]))                           # not offered
    if stream:
        calls, finish, _ = _streamed_calls(client.chat.completions.create(
            model="qwen3:8b", messages=MSG, tools=TOOLS, stream=True))
        assert calls == {} and finish == "stop"
    else:
        done = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
        assert not done.choices[0].message.tool_calls
        assert done.choices[0].finish_reason == "stop"


def test_ollama_index_zero_calls_become_distinct(fake: FakeOllama,
                                                 client: openai.OpenAI) -> None:
    # Ollama streams every call whole with index 0 (and old versions repeat ids).
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_samesame", 0),
        tool_call("read_file", {"path": "/etc/hosts"}, "call_samesame", 0)]))
    calls, finish, _ = _streamed_calls(client.chat.completions.create(
        model="qwen3:8b", messages=MSG, tools=TOOLS, stream=True))
    assert finish == "tool_calls"
    assert sorted(calls) == [0, 1]
    assert [calls[i]["name"] for i in (0, 1)] == ["get_weather", "read_file"]
    assert calls[0]["id"] != calls[1]["id"]


def test_parallel_false_keeps_first_call(fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_1"),
        tool_call("get_weather", {"city": "Paris"}, "call_2", 1)]))
    done = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS,
                                          parallel_tool_calls=False)
    calls = done.choices[0].message.tool_calls or []
    assert [c.function.arguments for c in calls] == ['{"city":"Tokyo"}']


@pytest.mark.parametrize("stream", [False, True])
def test_text_call_is_recovered(fake: FakeOllama, client: openai.OpenAI, caps_path: Path,
                                stream: bool) -> None:
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}' \
           '\n</tool_call>'
    pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
    fake.reply("qwen3:8b", Reply(content=pieces))
    if stream:
        calls, finish, content = _streamed_calls(client.chat.completions.create(
            model="qwen3:8b", messages=MSG, tools=TOOLS, stream=True))
        assert [(c["name"], c["arguments"]) for c in calls.values()] == [
            ("get_weather", '{"city":"Tokyo"}')]
        assert finish == "tool_calls"
        assert content.strip() == "Let me check."
    else:
        done = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
        message = done.choices[0].message
        assert [c.function.name for c in message.tool_calls or []] == ["get_weather"]
        assert (message.content or "").strip() == "Let me check."
        assert done.choices[0].finish_reason == "tool_calls"
    # The format that worked is remembered for the model, as an observation.
    entry = learned_entry(caps_path, "qwen3:8b", holding="tool_format")
    assert entry["tool_format"] == "hermes"
    assert entry["source"] == "observed"


def test_text_call_to_unoffered_tool_stays_text(fake: FakeOllama, client: openai.OpenAI) -> None:
    text = '<tool_call>{"name": "launch_rockets", "arguments": {}}</tool_call>'
    fake.reply("qwen3:8b", Reply(content=[text]))
    done = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
    assert not done.choices[0].message.tool_calls
    assert done.choices[0].message.content == text
    assert done.choices[0].finish_reason == "stop"


def test_plain_answer_with_tools_offered_is_untouched(fake: FakeOllama,
                                                      client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(content=["It is ", "sunny ", "{probably}."]))
    _, finish, content = _streamed_calls(client.chat.completions.create(
        model="qwen3:8b", messages=MSG, tools=TOOLS, stream=True))
    assert content == "It is sunny {probably}."
    assert finish == "stop"


# Families whose control tokens are markup (Kimi K3's channels, GigaChat's separator):
# what the client sees of them is the reply's text only, streamed or not.
KIMI_K3 = ("<|open|>response<|sep|>Let me check.<|close|>response<|sep|><|open|>tools<|sep|>"
           '<|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" '
           'type="string"<|sep|>Tokyo<|close|>argument<|sep|><|close|>call<|sep|>'
           "<|close|>tools<|sep|><|close|>message<|sep|>")
GIGACHAT3 = ('Let me check.<|message_sep|>\n\nfunction call<|role_sep|>\n'
             '{"name": "get_weather", "arguments": {"city": "Tokyo"}}</s>')


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("model", "text"), [("kimi-k3:cloud", KIMI_K3),
                                             ("gigachat3:10b", GIGACHAT3)])
def test_control_tokens_never_reach_the_client(fake: FakeOllama, client: openai.OpenAI,
                                               model: str, text: str, stream: bool) -> None:
    fake.add_model(model)
    fake.reply(model, Reply(content=[text[i:i + 5] for i in range(0, len(text), 5)]))
    if stream:
        calls, finish, content = _streamed_calls(client.chat.completions.create(
            model=model, messages=MSG, tools=TOOLS, stream=True))
        found = [(c["name"], c["arguments"]) for c in calls.values()]
    else:
        done = client.chat.completions.create(model=model, messages=MSG, tools=TOOLS)
        message, finish = done.choices[0].message, done.choices[0].finish_reason
        found = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
        content = message.content or ""
    assert found == [("get_weather", '{"city":"Tokyo"}')]
    assert finish == "tool_calls"
    assert content.strip() == "Let me check."
