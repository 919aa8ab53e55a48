"""The 2026 families end to end: text calls recovered and reasoning moved, through the
openai SDK and the real app, the backend faked at the HTTP boundary (Ollama /v1)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.tools import WEATHER_CLOSED

MSG: list[Any] = [{"role": "user", "content": "weather in Tokyo?"}]
Q = '<|"|>'

# (model as Ollama names it, what the model wrote), each with prose before the call.
CALLS = [
    ("gemma4:e4b", f"Let me check.<|tool_call>call:get_weather{{city:{Q}Tokyo{Q}}}<tool_call|>"),
    ("functiongemma:270m",
     ("Let me check.<start_function_call>call:get_weather{city:<escape>Tokyo<escape>}"
     "<end_function_call>")),
    ("olmo-3:7b", 'Let me check.<function_calls>get_weather(city="Tokyo")</function_calls>'),
    ("seed-oss:36b", ("Let me check.\n<seed:tool_call>\n<function=get_weather>\n"
                     "<parameter=city>Tokyo</parameter>\n</function>\n</seed:tool_call>")),
    ("step3:321b", ('Let me check.<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke '
                   'name="get_weather"><steptml:parameter name="city">Tokyo</steptml:parameter>'
                   "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>")),
    ("longcat-flash:latest", ('Let me check.<longcat_tool_call>{"name": "get_weather", '
                             '"arguments": {"city": "Tokyo"}}</longcat_tool_call>')),
]


def _ask(client: openai.OpenAI, model: str, stream: bool) -> tuple[list[tuple[str, str]], str, str]:
    """(calls as (name, arguments), content, reasoning_content)."""
    if not stream:
        message = client.chat.completions.create(model=model, messages=MSG,
                                                 tools=[WEATHER_CLOSED]).choices[0].message
        calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return calls, message.content or "", (message.model_extra or {}).get(
            "reasoning_content") or ""
    parts: dict[int, list[str]] = {}
    content = reasoning = ""
    for chunk in client.chat.completions.create(model=model, messages=MSG, tools=[WEATHER_CLOSED],
                                                stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
            for tc in choice.delta.tool_calls or []:
                part = parts.setdefault(tc.index, ["", ""])
                part[0] += (tc.function.name or "") if tc.function else ""
                part[1] += (tc.function.arguments or "") if tc.function else ""
    return [(name, args) for name, args in parts.values()], content, reasoning


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("model", "text"), CALLS, ids=[m for m, _ in CALLS])
def test_text_call_is_recovered(fake: FakeOllama, client: openai.OpenAI, model: str,
                                text: str, stream: bool) -> None:
    fake.add_model(model)
    fake.reply(model, Reply(content=[text[i : i + 5] for i in range(0, len(text), 5)]))
    calls, content, _ = _ask(client, model, stream)
    assert calls == [("get_weather", '{"city":"Tokyo"}')]
    assert content.strip() == "Let me check."


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_quoted_in_mistrals_think_is_reasoning(fake: FakeOllama, client: openai.OpenAI,
                                                      stream: bool) -> None:
    # The miss: it used to be recovered as a real call.
    text = ('[THINK]I could write [TOOL_CALLS]get_weather[ARGS]{"city": "Tokyo"} but I know '
            "it.[/THINK]It is sunny.")
    fake.add_model("magistral:24b")
    fake.reply("magistral:24b", Reply(content=[text[i : i + 4] for i in range(0, len(text), 4)]))
    calls, content, reasoning = _ask(client, "magistral:24b", stream)
    assert (calls, content) == ([], "It is sunny.")
    assert reasoning.startswith("I could write [TOOL_CALLS]")


@pytest.mark.parametrize("stream", [False, True])
def test_gemma4_reasoning_then_call(fake: FakeOllama, client: openai.OpenAI,
                                    stream: bool) -> None:
    # ollama model/parsers/gemma4_test.go TestGemma4Parser/thinking_then_tool_call
    text = (f"<|channel>thought\nI need to check the weather<channel|>"
            f"<|tool_call>call:get_weather{{city:{Q}Tokyo{Q}}}<tool_call|>")
    fake.add_model("gemma4:e4b")
    fake.reply("gemma4:e4b", Reply(content=[text[i : i + 3] for i in range(0, len(text), 3)]))
    calls, content, reasoning = _ask(client, "gemma4:e4b", stream)
    assert calls == [("get_weather", '{"city":"Tokyo"}')]
    assert (content.strip(), reasoning) == ("", "I need to check the weather")
