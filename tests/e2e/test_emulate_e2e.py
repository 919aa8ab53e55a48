"""emulate mode end to end: tools described in the prompt, text calls back as tool_calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply
from support.tools import WEATHER

from proxy.formats import FORMATS, get_format
from proxy.formats.base import ParsedCall

HISTORY: list[Any] = [
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C and cloudy"},
    {"role": "user", "content": "and Tokyo?"},
]


def _configure(path: Path, tool_format: str, proxy_url: str) -> None:
    edit_and_wait(path, f'version: 1\nmodels:\n  "gemma3:*":\n    tools: emulate\n'
                        f'    tool_format: {tool_format}\n', proxy_url)


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("stream", [False, True])
def test_emulated_call_in_each_format(fake: FakeOllama, client: openai.OpenAI, caps_path: Path,
                                      proxy_url: str, name: str, stream: bool) -> None:
    _configure(caps_path, name, proxy_url)
    text = get_format(name).render_calls([ParsedCall("get_weather", {"city": "Tokyo"})])
    fake.reply("gemma3:4b", Reply(content=[text[i:i + 5] for i in range(0, len(text), 5)]))

    if stream:
        calls: dict[int, dict[str, str]] = {}
        finish = None
        for chunk in client.chat.completions.create(model="gemma3:4b", messages=HISTORY,
                                                    tools=[WEATHER], stream=True):
            for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                call = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                call["name"] += (tc.function.name or "") if tc.function else ""
                call["arguments"] += (tc.function.arguments or "") if tc.function else ""
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
        got = [(c["name"], c["arguments"]) for c in calls.values()]
    else:
        done = client.chat.completions.create(model="gemma3:4b", messages=HISTORY,
                                              tools=[WEATHER])
        finish = done.choices[0].finish_reason
        got = [(c.function.name, c.function.arguments)
               for c in done.choices[0].message.tool_calls or []]
    assert got == [("get_weather", '{"city":"Tokyo"}')]
    assert finish == "tool_calls"

    sent = fake.chat_requests()[-1]
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(sent)
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in sent["messages"])
    prompt = " ".join(str(m.get("content")) for m in sent["messages"])
    assert "get_weather" in prompt and "18C and cloudy" in prompt
