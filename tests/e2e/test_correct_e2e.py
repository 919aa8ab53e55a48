"""`invalid_tool_calls: correct` end to end: the model is asked again, through the openai SDK."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from support.capfile import edit_and_wait, learned
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.leaving import wait_for_cancel
from support.polling import until
from support.tools import READ_FILE, WEATHER_CLOSED

TOOLS: list[Any] = [WEATHER_CLOSED, READ_FILE]
MSG: list[Any] = [{"role": "user", "content": "weather in Tokyo?"}]
GOOD = tool_call("get_weather", {"city": "Tokyo"}, "call_goodgood")

# Each failure kind: the wrong first answer, what the correction message must say.
FAILURES: dict[str, tuple[Reply, str]] = {
    "unknown_tool": (Reply(tool_calls=[tool_call("get_wether", {"city": "Tokyo"})]),
                     "`get_wether`, which does not exist"),
    "bad_json": (Reply(tool_calls=[tool_call("get_weather", "city: Tokyo")]),
                 "are not valid JSON"),
    "schema": (Reply(tool_calls=[tool_call("get_weather", {"town": "Tokyo"})]),
               "does not match its parameters"),
    "cut_off": (Reply(tool_calls=[tool_call("get_weather", '{"city": "Tok')], finish="length"),
                "was cut off"),
}


@pytest.fixture
def caps_path(tmp_path: Path) -> Path:
    path = tmp_path / "capabilities.yaml"
    path.write_text('version: 1\nmodels:\n  "qwen3:*":\n    invalid_tool_calls: correct\n')
    return path


def _ask(client: openai.OpenAI, stream: bool, **extra: Any) -> tuple[list[tuple[str, str]],
                                                                     str | None, str, Any]:
    """(calls as (name, arguments), finish_reason, text, x_toolshim), streamed or not."""
    args: dict[str, Any] = {"model": "qwen3:8b", "messages": MSG, "tools": TOOLS, **extra}
    if not stream:
        done = client.chat.completions.create(**args)
        message = done.choices[0].message
        calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return calls, done.choices[0].finish_reason, message.content or "", \
            (done.model_extra or {}).get("x_toolshim")
    got: dict[int, list[str]] = {}
    finish, text, note = None, "", None
    for chunk in client.chat.completions.create(stream=True, **args):
        note = (chunk.model_extra or {}).get("x_toolshim") or note
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                call = got.setdefault(tc.index, ["", ""])
                call[0] += (tc.function and tc.function.name) or ""
                call[1] += (tc.function and tc.function.arguments) or ""
            finish = choice.finish_reason or finish
    return [(n, a) for n, a in got.values()], finish, text, note


def _correction_prompt(fake: FakeOllama) -> str:
    second = fake.chat_requests()[-1]["messages"]
    assert second[0] == MSG[0], "the client's history goes first, unchanged"
    assert second[-2]["role"] == "assistant"
    assert second[-1]["role"] == "user"
    return str(second[-1]["content"])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_wrong_then_right_gives_the_corrected_call(fake: FakeOllama, client: openai.OpenAI,
                                                   kind: str, stream: bool) -> None:
    wrong, says = FAILURES[kind]
    fake.reply("qwen3:8b", wrong)
    fake.reply("qwen3:8b", Reply(tool_calls=[GOOD]))
    calls, finish, _, note = _ask(client, stream)
    assert calls == [("get_weather", '{"city":"Tokyo"}')]
    assert finish == "tool_calls"
    assert note is not None and note["corrected"] is True and note["corrections"] == 1
    assert len(fake.chat_requests()) == 2
    prompt = _correction_prompt(fake)
    assert says in prompt
    if kind == "unknown_tool":
        assert "get_weather, read_file" in prompt and "Did you mean `get_weather`" in prompt


@pytest.mark.parametrize("stream", [False, True])
def test_wrong_twice_drops_like_drop(fake: FakeOllama, client: openai.OpenAI,
                                     stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["Checking."],
                                 tool_calls=[tool_call("get_wether", {"city": "Tokyo"})]))
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("weather", {"city": "Tokyo"})]))
    calls, finish, text, note = _ask(client, stream)
    assert calls == [] and finish == "stop"
    assert text == "Checking.", "the first turn's text reached the client once"
    assert note is not None and note["corrected"] is False and note["corrections"] == 1
    assert len(fake.chat_requests()) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_text_streamed_before_the_call_is_not_repeated(fake: FakeOllama, client: openai.OpenAI,
                                                       stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["Let me ", "look."],
                                 tool_calls=[tool_call("get_weather", {"town": "Tokyo"})]))
    fake.reply("qwen3:8b", Reply(content=["Let me look again."], tool_calls=[GOOD]))
    calls, finish, text, _ = _ask(client, stream)
    assert text == "Let me look."
    assert calls == [("get_weather", '{"city":"Tokyo"}')] and finish == "tool_calls"
    assert fake.chat_requests()[-1]["messages"][-2]["content"] == "Let me look."


@pytest.mark.parametrize("stream", [False, True])
def test_call_under_tool_choice_none_is_corrected_into_text(
        fake: FakeOllama, client: openai.OpenAI, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[GOOD]))
    fake.reply("qwen3:8b", Reply(content=["It is sunny."]))
    calls, finish, text, note = _ask(client, stream, tool_choice="none")
    assert calls == [] and finish == "stop" and text == "It is sunny."
    assert note["corrected"] is True
    assert "no tool may be called" in _correction_prompt(fake)


@pytest.mark.parametrize("stream", [False, True])
def test_call_under_tool_choice_none_twice_is_dropped(
        fake: FakeOllama, client: openai.OpenAI, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[GOOD]))
    calls, finish, _, note = _ask(client, stream, tool_choice="none")
    assert calls == [] and finish == "stop" and note["corrected"] is False


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("choice", ["required", "named"])
def test_no_call_when_one_was_required(fake: FakeOllama, client: openai.OpenAI,
                                       stream: bool, choice: str) -> None:
    tool_choice: Any = choice if choice == "required" else {
        "type": "function", "function": {"name": "get_weather"}}
    fake.reply("qwen3:8b", Reply(content=["It is probably sunny."]))
    fake.reply("qwen3:8b", Reply(tool_calls=[GOOD]))
    calls, finish, text, note = _ask(client, stream, tool_choice=tool_choice)
    assert text == "It is probably sunny."
    assert calls == [("get_weather", '{"city":"Tokyo"}')] and finish == "tool_calls"
    assert note["corrected"] is True
    prompt = _correction_prompt(fake)
    if choice == "required":
        assert "A tool call is required" in prompt and "get_weather, read_file" in prompt
    else:
        assert "You must call `get_weather`" in prompt


@pytest.mark.parametrize("stream", [False, True])
def test_no_call_twice_returns_what_it_said(fake: FakeOllama, client: openai.OpenAI,
                                            stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["Sunny, I think."]))
    calls, finish, text, note = _ask(client, stream, tool_choice="required")
    assert calls == [] and finish == "stop" and text == "Sunny, I think."
    assert note["corrected"] is False


def test_valid_calls_are_not_corrected(fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[GOOD]))
    calls, finish, _, note = _ask(client, True)
    assert calls == [("get_weather", '{"city":"Tokyo"}')] and finish == "tool_calls"
    assert note is None and len(fake.chat_requests()) == 1


def test_repair_comes_first(fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("Get_Weather", {"city": "Tokyo"})]))
    calls, _, _, _ = _ask(client, False)
    assert calls == [("get_weather", '{"city":"Tokyo"}')] and len(fake.chat_requests()) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_max_corrections_bounds_the_attempts(fake: FakeOllama, caps_path: Path, proxy_url: str,
                                             client: openai.OpenAI, stream: bool) -> None:
    edit_and_wait(caps_path, 'version: 1\nmodels:\n  "qwen3:*":\n    invalid_tool_calls: correct\n'
                  '    max_corrections: 2\n', proxy_url)
    bad = Reply(tool_calls=[tool_call("nope", {})])
    fake.reply("qwen3:8b", bad)
    fake.reply("qwen3:8b", bad)
    fake.reply("qwen3:8b", Reply(tool_calls=[GOOD]))
    calls, _, _, note = _ask(client, stream)
    assert calls == [("get_weather", '{"city":"Tokyo"}')]
    assert note["corrections"] == 2 and len(fake.chat_requests()) == 3


def test_max_corrections_zero_is_drop(fake: FakeOllama, caps_path: Path, proxy_url: str,
                                      client: openai.OpenAI) -> None:
    edit_and_wait(caps_path, 'version: 1\nmodels:\n  "qwen3:*":\n    invalid_tool_calls: correct\n'
                  '    max_corrections: 0\n', proxy_url)
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("nope", {})]))
    calls, finish, _, _ = _ask(client, False)
    assert calls == [] and finish == "stop" and len(fake.chat_requests()) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_client_leaving_during_a_correction_cancels_it(
        fake: FakeOllama, proxy_url: str, new_sdk: Callable[..., openai.OpenAI],
        stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["Checking."], tool_calls=[tool_call("nope", {})]))
    fake.reply("qwen3:8b", Reply(content=["slow"], tool_calls=[GOOD], delay=3.0))
    quick = new_sdk(proxy_url).with_options(timeout=1.0)
    with pytest.raises(openai.APITimeoutError):
        if stream:
            for _ in quick.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS,
                                                   stream=True):
                pass
        else:
            quick.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
    wait_for_cancel(fake, within=5)
    assert fake.abandoned == 1, "the correction's upstream call was cancelled"
    assert len(fake.chat_requests()) == 2


def test_counts_and_learned_entry(fake: FakeOllama, caps_path: Path,
                                  client: openai.OpenAI, proxy_url: str,
                                  new_sdk: Callable[..., openai.OpenAI]) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("nope", {})]))
    fake.reply("qwen3:8b", Reply(tool_calls=[GOOD]))
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("nope", {})]))
    _ask(client, False)   # corrected
    _ask(client, True)    # wrong twice
    # Both corrections are counted in one entry, possibly written in two goes.
    until(lambda: learned(caps_path).get("qwen3:8b", {}).get("correction", {}).get("tried") == 2,
          what="learned: qwen3:8b.correction.tried == 2")
    entry = learned(caps_path)["qwen3:8b"]
    correction = entry["correction"]
    assert correction["tried"] == 2 and correction["succeeded"] == 1
    assert str(correction["at"]).endswith("Z")
    assert "invalid_tool_calls" not in entry, "a count is not a behaviour"
    metrics = new_sdk(proxy_url)._client.get(proxy_url + "/metrics").text
    assert 'toolshim_corrections_total{model="qwen3:8b",outcome="tried"} 2.0' in metrics
    assert 'toolshim_corrections_total{model="qwen3:8b",outcome="succeeded"} 1.0' in metrics


@pytest.mark.parametrize("stream", [False, True])
def test_a_failing_correction_leaves_the_first_answer(fake: FakeOllama, client: openai.OpenAI,
                                                      stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["Checking."], tool_calls=[tool_call("nope", {})]))
    fake.reply("qwen3:8b", Reply(status=500, body=b'{"error":{"message":"model crashed",'
                                 b'"type":"api_error","param":null,"code":null}}'))
    calls, finish, text, note = _ask(client, stream)
    assert (calls, finish, text) == ([], "stop", "Checking.")
    assert note["corrected"] is False and note["corrections"] == 1
