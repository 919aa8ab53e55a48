"""Server tools between clients and within a turn: nothing crosses keys, calls are capped.

Two API keys through real HTTP (the openai SDK against uvicorn on loopback):
a mixed turn's set-aside server calls go back only into the history of the
key that made the turn, once. One turn's server-tool calls are capped in
number, and identical calls in it run once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.settings import Settings

MSG: list[Any] = [{"role": "user", "content": "help"}]


@pytest.fixture
def caps_path(tmp_path: Path) -> Path:
    caps = {"version": 1,
            "server_tools": {"calc": {"kind": "builtin", "builtin": "calculator"},
                             "count": {"kind": "mock", "result": "counted"}},
            "defaults": {"max_server_tool_calls": 3},
            "models": {"qwen3*": {"server_tools": ["*"]}}}
    path = tmp_path / "capabilities.yaml"
    path.write_bytes(orjson.dumps(caps))
    return path


@pytest.fixture
def proxy_url(make_settings: Callable[..., Settings]) -> Iterator[str]:
    with serve(create_app(make_settings(api_keys=("key-alice", "key-mallory")))) as url:
        yield url


def _mixed_turn(fake: FakeOllama, alice: openai.OpenAI) -> list[Any]:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("calc", {"expression": "6*7"}, "call_calc0001"),
        tool_call("get_weather", {"city": "Oslo"}, "call_wthr0001", index=1)],
        finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["42 and rainy."]))
    first = alice.chat.completions.create(model="qwen3:8b", messages=MSG, tools=[WEATHER])
    message = first.choices[0].message
    assert [c.id for c in message.tool_calls or []] == ["call_wthr0001"]
    return [*MSG, message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": "call_wthr0001", "content": "rain"}]


def _sent_names(fake: FakeOllama) -> list[str]:
    sent = fake.chat_requests()[-1]["messages"]
    return [c["function"]["name"] for m in sent for c in m.get("tool_calls") or []]


def test_another_key_that_knows_the_call_id_gets_nothing_back(
        fake: FakeOllama, proxy_url: str, new_sdk: Callable[..., openai.OpenAI]) -> None:
    alice, mallory = new_sdk(proxy_url, "key-alice"), new_sdk(proxy_url, "key-mallory")
    history = _mixed_turn(fake, alice)
    mallory.chat.completions.create(model="qwen3:8b", messages=history, tools=[WEATHER])
    assert _sent_names(fake) == ["get_weather"]  # not alice's calc call
    assert "42" not in orjson.dumps(fake.chat_requests()[-1]["messages"]).decode()
    # Alice still gets hers back, once.
    alice.chat.completions.create(model="qwen3:8b", messages=history, tools=[WEATHER])
    assert _sent_names(fake) == ["calc", "get_weather"]
    alice.chat.completions.create(model="qwen3:8b", messages=history, tools=[WEATHER])
    assert _sent_names(fake) == ["get_weather"]


def test_a_turns_server_calls_are_capped_and_identical_ones_run_once(
        fake: FakeOllama, proxy_url: str, new_sdk: Callable[..., openai.OpenAI]) -> None:
    alice = new_sdk(proxy_url, "key-alice")
    calls = [tool_call("calc", {"expression": "1+1"}, "call_same0001"),
             tool_call("calc", {"expression": " 1+1"}, "call_diff0001", index=1),
             tool_call("calc", {"expression": "1+1"}, "call_same0002", index=2),
             tool_call("count", {"a": 1, "b": 2}, "call_cnt00001", index=3),
             tool_call("count", {"b": 2, "a": 1}, "call_cnt00002", index=4)]
    fake.reply("qwen3:8b", Reply(tool_calls=calls, finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["Done."]))
    raw = alice.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    assert raw.parse().choices[0].message.content == "Done."
    assert raw.headers["x-toolshim-server-tool-calls"] == "3"  # 3 distinct calls ran
    results = {m["tool_call_id"]: m["content"]
               for m in fake.chat_requests()[-1]["messages"] if m["role"] == "tool"}
    assert results == {"call_same0001": "2", "call_diff0001": "2", "call_same0002": "2",
                       "call_cnt00001": "counted", "call_cnt00002": "counted"}


def test_more_distinct_calls_than_the_cap_are_error_results(
        fake: FakeOllama, proxy_url: str, new_sdk: Callable[..., openai.OpenAI]) -> None:
    alice = new_sdk(proxy_url, "key-alice")
    calls = [tool_call("calc", {"expression": f"{i}+1"}, f"call_many{i:04d}", index=i)
             for i in range(5)]
    fake.reply("qwen3:8b", Reply(tool_calls=calls, finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["Some."]))
    raw = alice.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    assert raw.headers["x-toolshim-server-tool-calls"] == "3"
    results = [m["content"] for m in fake.chat_requests()[-1]["messages"]
               if m["role"] == "tool"]
    assert results[:3] == ["1", "2", "3"]
    for late in results[3:]:
        assert "max_server_tool_calls" in orjson.loads(late)["error"]
