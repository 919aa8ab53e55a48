"""Learning end to end: refusal -> retry -> learned: entry -> next request goes straight."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from support.capfile import edit_and_wait, learned, learned_entry
from support.fake_ollama import FakeOllama, Reply
from support.inprocess import InProcessApps
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.settings import Settings

TOOLS: list[Any] = [WEATHER]
MSG: list[Any] = [{"role": "user", "content": "hi"}]
PERSON = """# my notes: keep this comment
version: 1
defaults:
  tools: auto   # inline comment

models:
  "qwen3*":
    max_tools: 10
"""


def test_refusal_is_retried_learned_and_remembered(new_sdk: Callable[..., openai.OpenAI], 
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path) -> None:
    caps_path.write_text(PERSON)
    settings = make_settings(probe=False)
    with serve(create_app(settings)) as url:
        sdk = new_sdk(url)
        raw = sdk.chat.completions.with_raw_response.create(
            model="gemma3:4b", messages=MSG, tools=TOOLS)
        assert raw.parse().choices[0].message.content == "Hello from gemma3:4b"
        # The shipped fallback is emulate: the tools are described in the prompt.
        assert raw.headers["x-toolshim-rung"] == "emulate"
        assert raw.headers["x-toolshim-retries"] == "1"
        sent = fake.chat_requests()
        assert "tools" in sent[0] and "tools" not in sent[1]
        assert "get_weather" in sent[1]["messages"][0]["content"]

        entry = learned_entry(caps_path, "gemma3:4b")
        # The fact is learned, not the rung: the fallback in force decides.
        assert "tools" not in entry
        assert entry["tool_support"] == "refused" and entry["source"] == "runtime_error"
        assert entry["upstream"] == settings.upstreams[0]
        assert entry["at"].endswith("Z")
        assert "does not support tools" in entry["evidence"]
        assert caps_path.read_text().startswith(PERSON)  # the person's part, byte for byte

        before = len(fake.chat_requests())
        again = sdk.chat.completions.with_raw_response.create(
            model="gemma3:4b", messages=MSG, tools=TOOLS)
        assert "x-toolshim-retries" not in again.headers
        assert again.headers["x-toolshim-rung"] == "emulate"
        assert len(fake.chat_requests()) == before + 1
        assert "tools" not in fake.chat_requests()[-1]

    # A restarted proxy applies the fact from the file at once.
    with serve(create_app(settings)) as url:
        sdk = new_sdk(url)
        before = len(fake.chat_requests())
        sdk.chat.completions.create(model="gemma3:4b", messages=MSG, tools=TOOLS)
        assert len(fake.chat_requests()) == before + 1
        assert "tools" not in fake.chat_requests()[-1]


def test_a_persons_entry_wins_over_learning(new_sdk: Callable[..., openai.OpenAI], 
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path) -> None:
    caps_path.write_text('version: 1\nmodels:\n  "gemma3:4b":\n    tools: native\n')
    with serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        try:
            sdk.chat.completions.create(model="gemma3:4b", messages=MSG, tools=TOOLS)
        except openai.BadRequestError as exc:
            assert "does not support tools" in str(exc)
        else:
            raise AssertionError("native was overruled")
    assert "gemma3:4b" not in learned(caps_path)


def test_probe_learns_before_the_first_request(new_sdk: Callable[..., openai.OpenAI], 
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path) -> None:
    with serve(create_app(make_settings())) as url:
        sdk = new_sdk(url)
        sdk.chat.completions.create(model="gemma3:4b", messages=MSG, tools=TOOLS)
        # /api/show said no "tools": the first request already went without them.
        assert [("tools" in r) for r in fake.chat_requests()] == [False]
        assert learned_entry(caps_path, "gemma3:4b")["source"] == "probe"


def test_other_errors_are_not_mistaken_for_refusals(new_sdk: Callable[..., openai.OpenAI], 
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path) -> None:
    # A listed model removed on the backend since: Ollama's own 404, not a refusal.
    fake.reply("qwen3:8b", Reply(status=404, body=b'{"error":{"message":"model \'qwen3:8b\' '
                                 b'not found","type":"not_found_error","param":null,'
                                 b'"code":null}}\n'))
    with serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        try:
            sdk.chat.completions.create(model="qwen3:8b", messages=MSG, tools=TOOLS)
        except openai.NotFoundError:
            pass
        else:
            raise AssertionError("404 expected")
    assert len(fake.chat_requests()) == 1
    assert learned(caps_path) == {}


OLD_LEARNED = """version: 1
learned:
  "gemma3:4b":
    tools: off
    source: runtime_error
    at: "2026-11-22T10:00:00Z"
    evidence: "registry.ollama.ai/library/gemma3:4b does not support tools"
"""


def _rung(sdk: openai.OpenAI) -> str:
    raw = sdk.chat.completions.with_raw_response.create(model="gemma3:4b", messages=MSG,
                                                        tools=TOOLS)
    return raw.headers["x-toolshim-rung"]


@pytest.mark.parametrize("person", [
    "defaults:\n  fallback: off\n", "models:\n  \"gemma3:*\":\n    fallback: off\n"])
def test_a_persons_fallback_decides_for_a_model_learned_before_and_after(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings], caps_path: Path, person: str) -> None:
    # An older file's learned `tools: off` is read as the fact (refused): with the
    # shipped fallback the model gets emulation, and a person's `fallback: off`
    # written later (in defaults or a glob) takes effect without touching learned:.
    caps_path.write_text(OLD_LEARNED)
    fake.add_model("gemma3:1b", tools=False)
    with serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        assert _rung(sdk) == "emulate"
        assert len(fake.chat_requests()) == 1  # straight to the fallback, no refusal first
        edit_and_wait(caps_path, OLD_LEARNED.replace("learned:", person + "learned:"), url)
        assert _rung(sdk) == "off"
        sent = fake.chat_requests()[-1]
        assert "tools" not in sent and "get_weather" not in str(sent["messages"])
        # Learned after: a model refused now follows the same person's fallback.
        raw = sdk.chat.completions.with_raw_response.create(model="gemma3:1b", messages=MSG,
                                                            tools=TOOLS)
        assert raw.headers["x-toolshim-rung"] == "off"
        assert learned_entry(caps_path, "gemma3:1b")["tool_support"] == "refused"
        edit_and_wait(caps_path, caps_path.read_text().replace(person, ""), url)
        raw = sdk.chat.completions.with_raw_response.create(model="gemma3:1b", messages=MSG,
                                                            tools=TOOLS)
        assert raw.headers["x-toolshim-rung"] == "emulate"


def _read(answer: Any) -> None:
    if isinstance(answer, openai.Stream):
        list(answer)


def test_a_learned_refusal_applies_to_the_very_next_request(
        new_sdk: Callable[..., openai.OpenAI], fake: FakeOllama,
        make_settings: Callable[..., Settings]) -> None:
    """No waiting between the requests: the second goes straight to the learned rung,
    for every model, streamed or not (the fact is in force before the answer leaves)."""
    names = [f"refuser-{i}:1b" for i in range(6)]
    for name in names:
        fake.add_model(name, tools=False)
    with serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        for i, name in enumerate(names):
            stream = bool(i % 2)
            calls = len(fake.chat_requests())
            first = sdk.chat.completions.with_raw_response.create(
                model=name, messages=MSG, tools=TOOLS, stream=stream)
            _read(first.parse())  # as a client does: the whole answer, then the next
            assert first.headers["x-toolshim-retries"] == "1"
            assert len(fake.chat_requests()) == calls + 2
            second = sdk.chat.completions.with_raw_response.create(
                model=name, messages=MSG, tools=TOOLS, stream=stream)
            _read(second.parse())
            assert "x-toolshim-retries" not in second.headers, name
            assert len(fake.chat_requests()) == calls + 3
            assert "tools" not in fake.chat_requests()[-1]


async def test_the_next_request_in_process_goes_straight_to_the_learned_rung(
        fake: FakeOllama, make_settings: Callable[..., Settings]) -> None:
    """In process the answer is back the moment the app returns: the fact must be in
    force by then, not in a thread that has yet to run."""
    apps = InProcessApps(make_settings)
    http = await apps.open()
    try:
        aclient = openai.AsyncOpenAI(base_url="http://toolshim/v1", api_key="unused",
                                     http_client=http, max_retries=0)
        await _refused_then_straight(aclient, fake)
    finally:
        await apps.close()


async def _refused_then_straight(aclient: openai.AsyncOpenAI, fake: FakeOllama) -> None:
    first = await aclient.chat.completions.with_raw_response.create(
        model="gemma3:4b", messages=MSG, tools=TOOLS)
    assert first.headers["x-toolshim-retries"] == "1"
    calls = len(fake.chat_requests())
    second = await aclient.chat.completions.with_raw_response.create(
        model="gemma3:4b", messages=MSG, tools=TOOLS)
    assert "x-toolshim-retries" not in second.headers
    assert len(fake.chat_requests()) == calls + 1


def test_each_fact_written_is_one_info_line(
        caplog: pytest.LogCaptureFixture, new_sdk: Callable[..., openai.OpenAI],
        fake: FakeOllama, make_settings: Callable[..., Settings], caps_path: Path) -> None:
    caplog.set_level(logging.INFO)
    with serve(create_app(make_settings(probe=False))) as url:
        sdk = new_sdk(url)
        sdk.chat.completions.create(model="gemma3:4b", messages=MSG, tools=TOOLS)
        learned_entry(caps_path, "gemma3:4b")
        sdk.chat.completions.create(model="gemma3:4b", messages=MSG, tools=TOOLS)  # a repeat
    lines = [r for r in caplog.records if "learned 'gemma3:4b'" in r.getMessage()]
    assert [r.levelno for r in lines] == [logging.INFO]
    assert lines[0].getMessage() == \
        f"{caps_path}: learned 'gemma3:4b': tool_support='refused' (source: runtime_error)"
