"""Codex's own tools through /v1/responses, driven by the real openai SDK against the
fake Ollama: a `custom` apply_patch and `local_shell` go upstream as function tools and
come back as `custom_tool_call` / `local_shell_call` items, streamed and whole."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest
from support.fake_ollama import FakeOllama, Reply, tool_call

GRAMMAR = ('start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
           'end_patch: "*** End Patch" LF?\n%import common.LF\n')
APPLY_PATCH: Any = {"type": "custom", "name": "apply_patch", "description": "Patch files.",
                    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR}}
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n"


def test_custom_call_streams_as_custom_tool_call(client: openai.OpenAI,
                                                 fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("apply_patch", {"input": PATCH},
                                                       "call_patch0001")]))
    with client.responses.stream(model="qwen3:8b", input="add a.txt", tools=[APPLY_PATCH,
                                 {"type": "web_search"}]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert "response.custom_tool_call_input.delta" in kinds
    assert "response.function_call_arguments.delta" not in kinds
    done = next(e for e in events if e.type == "response.custom_tool_call_input.done")
    assert done.input == PATCH
    call = final.output[0]
    assert call.type == "custom_tool_call"
    assert (call.name, call.input, call.call_id) == ("apply_patch", PATCH, "call_patch0001")
    sent = fake.chat_requests()[-1]["tools"]
    assert [t["function"]["name"] for t in sent] == ["apply_patch"]
    assert sent[0]["function"]["parameters"]["properties"] == {"input": {"type": "string"}}
    assert GRAMMAR in sent[0]["function"]["description"]


def test_custom_round_trip_whole(client: openai.OpenAI, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("apply_patch", {"input": PATCH},
                                                       "call_patch0001")]))
    fake.reply("qwen3:8b", Reply(content=["Created a.txt."]))
    first = client.responses.create(model="qwen3:8b", input="add a.txt", tools=[APPLY_PATCH])
    call = first.output[0]
    assert call.type == "custom_tool_call" and call.input == PATCH
    second = client.responses.create(model="qwen3:8b", tools=[APPLY_PATCH], input=[
        {"role": "user", "content": "add a.txt"},
        {"type": "custom_tool_call", "call_id": call.call_id, "name": "apply_patch",
         "input": call.input},
        {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"}])
    assert second.output_text == "Created a.txt."
    messages = fake.chat_requests()[-1]["messages"]
    assert messages[-2]["tool_calls"][0]["function"] == {
        "name": "apply_patch", "arguments": orjson.dumps({"input": PATCH}).decode()}
    assert messages[-1] == {"role": "tool", "tool_call_id": "call_patch0001", "content": "Done!"}


def test_a_custom_call_without_its_string_is_dropped(client: openai.OpenAI,
                                                     fake: FakeOllama) -> None:
    # The check of a custom call is what its format allows: a string `input`.
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("apply_patch", {"patch": 3})]))
    raw = client.responses.with_raw_response.create(model="qwen3:8b", input="x",
                                                    tools=[APPLY_PATCH])
    assert raw.headers["x-toolshim-calls-dropped"] == "1"
    assert all(item.type != "custom_tool_call" for item in raw.parse().output)


@pytest.mark.parametrize("stream", [False, True])
def test_local_shell_call(client: openai.OpenAI, fake: FakeOllama, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call(
        "local_shell", {"command": ["cat", "a.txt"], "workdir": "/w"}, "call_shell001")]))
    if stream:
        with client.responses.stream(model="qwen3:8b", input="show a.txt",
                                     tools=[{"type": "local_shell"}]) as running:
            final = running.get_final_response()
    else:
        final = client.responses.create(model="qwen3:8b", input="show a.txt",
                                        tools=[{"type": "local_shell"}])
    call = final.output[0]
    assert call.type == "local_shell_call" and call.call_id == "call_shell001"
    assert call.action.type == "exec" and call.action.command == ["cat", "a.txt"]
    assert call.action.working_directory == "/w"
