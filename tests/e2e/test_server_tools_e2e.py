"""Server tools end to end: the fake model calls a server tool, toolshim runs it, asks again.

Every kind (builtin, mock, http, mcp over stdio and streamable HTTP) through
the openai SDK, streamed and not; mixed turns, the loop's limits, keep-alives
and a client that leaves mid-loop.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.mcp_inventory import inventory_app
from support.polling import until
from support.servers import serve
from support.tools import WEATHER

from proxy.flow import server_loop
from proxy.formats import get_format
from proxy.formats.base import ParsedCall

SECRET = "s3cret-inventory-key-42"
MSG: list[Any] = [{"role": "user", "content": "help"}]


class Stock:
    """The company HTTP API an `http` tool calls."""

    def __init__(self) -> None:
        self.keys: list[str | None] = []
        self.fail_next = 0
        self.left = threading.Event()

    def app(self) -> Starlette:
        async def stock(request: Request) -> Response:
            self.keys.append(request.headers.get("x-api-key"))
            if self.fail_next:
                self.fail_next -= 1
                return PlainTextResponse("busy", status_code=503)
            return JSONResponse({"data": {"item": request.path_params["item"], "level": 7}})

        async def slow(request: Request) -> Response:
            await asyncio.sleep(2)
            return PlainTextResponse("late")

        async def hang(request: Request) -> Response:
            for _ in range(500):
                if await request.is_disconnected():
                    self.left.set()
                    break
                await asyncio.sleep(0.02)
            return PlainTextResponse("done")

        return Starlette(routes=[Route("/stock/{item}", stock), Route("/slow", slow),
                                 Route("/hang", hang)])


@pytest.fixture
def stock() -> Iterator[tuple[Stock, str]]:
    api = Stock()
    with serve(api.app()) as url:
        yield api, url


@pytest.fixture
def caps_path(tmp_path: Path, stock: tuple[Stock, str], request: pytest.FixtureRequest,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TOOLSHIM_TEST_INVENTORY_KEY", SECRET)
    url = stock[1]
    tools: dict[str, Any] = {
        "calc": {"kind": "builtin", "builtin": "calculator", "description": "Arithmetic."},
        "lookup_order": {"kind": "mock", "description": "Order status.", "result": "shipped",
                         "parameters": {"type": "object",
                                        "properties": {"order_id": {"type": "string"}}}},
        "inventory": {"kind": "http", "url": url + "/stock/{item}", "result": "$.data.level",
                      "headers": {"X-Api-Key": "${TOOLSHIM_TEST_INVENTORY_KEY}"},
                      "allowed_hosts": ["127.0.0.1"], "retries": 1, "backoff": 0.01,
                      "parameters": {"type": "object",
                                     "properties": {"item": {"type": "string"}}}},
        "offlist": {"kind": "http", "url": url + "/stock/{item}",
                    "allowed_hosts": ["inventory.internal"]},
        "slow": {"kind": "http", "url": url + "/slow", "allowed_hosts": ["127.0.0.1"],
                 "timeout": 0.5, "retries": 0},
        "hang": {"kind": "http", "url": url + "/hang", "allowed_hosts": ["127.0.0.1"],
                 "timeout": 20, "retries": 0},
    }
    stack: list[Any] = []
    if "mcp_url" in request.fixturenames:
        tools["time"] = {"kind": "mcp", "command": sys.executable,
                         "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
        tools["inv"] = {"kind": "mcp", "url": request.getfixturevalue("mcp_url")}
    caps = {"version": 1, "server_tools": tools, "models": {
        "qwen3*": {"server_tools": ["*"]},
        "llama3*": {"server_tools": ["calc"], "max_iterations": 1},
        "mistral*": {"server_tools": ["calc"], "tools": "off"},
        "gemma3*": {"server_tools": ["calc"], "tools": "emulate", "tool_format": "hermes",
                    "rename": {"calc": "calculate"}}}}
    path = tmp_path / "capabilities.yaml"
    path.write_bytes(orjson.dumps(caps))  # JSON is YAML
    yield path
    for item in stack:
        item.close()


@pytest.fixture
def mcp_url() -> Iterator[str]:
    with serve(inventory_app()) as url:
        yield url + "/mcp"


def _then(fake: FakeOllama, model: str, *calls: dict[str, Any], answer: str = "done") -> None:
    for call in calls:
        fake.reply(model, Reply(tool_calls=[call], finish="tool_calls"))
    fake.reply(model, Reply(content=[answer[: len(answer) // 2], answer[len(answer) // 2:]]))


def _tool_results(fake: FakeOllama, request: int = -1) -> list[str]:
    messages = fake.chat_requests()[request]["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


def _stream(client: openai.OpenAI, model: str = "qwen3:8b",
            **extra: Any) -> tuple[str, str | None, list[Any], dict[str, Any]]:
    text, finish, calls, info = "", None, [], {}
    with client.chat.completions.create(model=model, messages=MSG, stream=True,
                                        **extra) as stream:
        for chunk in stream:
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            text += choice.delta.content or ""
            calls.extend(choice.delta.tool_calls or [])
            finish = choice.finish_reason or finish
            info.update((chunk.model_extra or {}).get("x_toolshim") or {})
    return text, finish, calls, info


def test_calculator_answer_goes_back_to_the_model(fake: FakeOllama,
                                                  client: openai.OpenAI) -> None:
    _then(fake, "qwen3:8b", tool_call("calc", {"expression": "2*(3+4)**2"}),
          answer="It is 98.")
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    done = raw.parse()
    assert done.choices[0].message.content == "It is 98."
    assert done.choices[0].message.tool_calls is None
    assert done.choices[0].finish_reason == "stop"
    assert raw.headers["x-toolshim-server-tool-calls"] == "1"
    assert raw.headers["x-toolshim-server-tool-iterations"] == "1"
    # The answer is built over the turns, not the last turn's body as it came.
    assert (done.model_extra or {})["x_toolshim"] == {"server_tool_calls": 1,
                                                      "server_tool_iterations": 1}
    first, second = fake.chat_requests()
    assert "calc" in [t["function"]["name"] for t in first["tools"]]
    assert _tool_results(fake) == ["98"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "calc"


def test_calculator_streamed_holds_the_call_and_counts_in_the_finish_chunk(
        fake: FakeOllama, client: openai.OpenAI) -> None:
    _then(fake, "qwen3:8b", tool_call("calc", {"expression": "sqrt(16) + 1"}),
          answer="Five.")
    text, finish, calls, info = _stream(client)
    assert (text, finish, calls) == ("Five.", "stop", [])
    assert info == {"server_tool_calls": 1, "server_tool_iterations": 1}
    assert _tool_results(fake) == ["5"]


@pytest.mark.parametrize("expression", ["__import__('os').system('id')", "9**9**9**9",
                                        "-(" * 200 + "1" + ")" * 200, "().__class__"])
def test_hostile_expressions_come_back_as_error_results(
        fake: FakeOllama, client: openai.OpenAI, expression: str) -> None:
    _then(fake, "qwen3:8b", tool_call("calc", {"expression": expression}), answer="Sorry.")
    done = client.chat.completions.create(model="qwen3:8b", messages=MSG)
    assert done.choices[0].message.content == "Sorry."
    (result,) = _tool_results(fake)
    assert "error" in orjson.loads(result)


@pytest.mark.parametrize("stream", [False, True])
def test_mock_tool(fake: FakeOllama, client: openai.OpenAI, stream: bool) -> None:
    _then(fake, "qwen3:8b", tool_call("lookup_order", {"order_id": "A1"}), answer="Shipped!")
    if stream:
        text = _stream(client)[0]
    else:
        text = client.chat.completions.create(model="qwen3:8b", messages=MSG).choices[0]\
            .message.content or ""
    assert text == "Shipped!"
    assert _tool_results(fake) == ["shipped"]


def test_http_tool_retries_sends_the_secret_and_never_logs_it(
        fake: FakeOllama, client: openai.OpenAI, stock: tuple[Stock, str],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api = stock[0]
    api.fail_next = 1
    _then(fake, "qwen3:8b", tool_call("inventory", {"item": "bolt"}), answer="7 bolts.")
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    assert raw.parse().choices[0].message.content == "7 bolts."
    assert _tool_results(fake) == ["7"]
    assert api.keys == [SECRET, SECRET]  # the 503 was retried once
    assert SECRET not in str(dict(raw.headers))
    # A whole answer is reported once sent: the line may come after the client has it.
    until(lambda: _request_lines(caplog), what="the request line")
    lines = _request_lines(caplog)
    assert lines and "inventory:ok" in str(lines[-1].record)  # type: ignore[attr-defined]
    assert SECRET not in caplog.text and all(SECRET not in str(vars(r)) for r in caplog.records)


def _request_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "request"]


def test_http_tool_allowlist_refusal_and_timeout_are_results(
        fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("offlist", {"item": "bolt"}, "call_off00001"),
        tool_call("slow", {}, "call_slow0001", index=1)], finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["Both failed."]))
    done = client.chat.completions.create(model="qwen3:8b", messages=MSG)
    assert done.choices[0].message.content == "Both failed."
    refused, late = (orjson.loads(r)["error"] for r in _tool_results(fake))
    assert "host '127.0.0.1' is not in the tool's allowed_hosts" in refused
    assert "0.5 s" in late


@pytest.mark.parametrize("stream", [False, True])
def test_mcp_servers_stdio_and_streamable_http(
        fake: FakeOllama, client: openai.OpenAI, proxy_url: str, mcp_url: str,
        stream: bool) -> None:
    _ready(proxy_url, {"time", "inv"})
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("time__get_current_time", {"timezone": "UTC"}, "call_time0001"),
        tool_call("inv__stock", {"item": "bolt"}, "call_inv00001", index=1)],
        finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["Noted."]))
    if stream:
        assert _stream(client)[:2] == ("Noted.", "stop")
    else:
        assert client.chat.completions.create(
            model="qwen3:8b", messages=MSG).choices[0].message.content == "Noted."
    offered = {t["function"]["name"] for t in fake.chat_requests()[0]["tools"]}
    assert {"time__get_current_time", "inv__stock"} <= offered
    clock, level = _tool_results(fake)
    assert "UTC" in clock and "datetime" in clock
    assert level == "bolt: 7 in stock"


def _ready(proxy_url: str, names: set[str]) -> None:
    def ready() -> bool:
        states = httpx.get(proxy_url + "/readyz").json().get("mcp_servers", {})
        return all(states.get(n, {}).get("state") == "ready" for n in names)
    until(ready, within=30, what=f"the MCP servers {sorted(names)} ready")


def test_admin_and_readyz_show_server_tools_without_secrets(proxy_url: str,
                                                            mcp_url: str) -> None:
    _ready(proxy_url, {"time", "inv"})
    ready = httpx.get(proxy_url + "/readyz")
    assert ready.status_code == 200
    assert ready.json()["mcp_servers"]["time"]["tools"] == [
        "time__convert_time", "time__get_current_time"]
    admin = httpx.get(proxy_url + "/admin/capabilities").text
    assert SECRET not in admin and SECRET not in ready.text
    assert '"mcp_servers"' in admin and "inv__stock" in admin


def test_mixed_turn_client_gets_its_call_and_the_server_part_is_put_back(
        fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("calc", {"expression": "6*7"}, "call_calc0001"),
        tool_call("get_weather", {"city": "Oslo"}, "call_wthr0001", index=1)],
        finish="tool_calls"))
    fake.reply("qwen3:8b", Reply(content=["42 and rainy."]))
    first = client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                           tools=[WEATHER])
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in message.tool_calls or []] == ["get_weather"]
    history = [*MSG, message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": "call_wthr0001", "content": "rain"}]
    second = client.chat.completions.create(model="qwen3:8b", messages=history,
                                            tools=[WEATHER])
    assert second.choices[0].message.content == "42 and rainy."
    sent = fake.chat_requests()[-1]["messages"]
    assert [c["function"]["name"] for c in sent[1]["tool_calls"]] == ["calc", "get_weather"]
    assert {m["tool_call_id"]: m["content"] for m in sent[2:]} == {
        "call_calc0001": "42", "call_wthr0001": "rain"}


def test_max_iterations_stops_with_a_clear_message(fake: FakeOllama,
                                                   client: openai.OpenAI) -> None:
    _then(fake, "llama3:8b", tool_call("calc", {"expression": "1+1"}),
          tool_call("calc", {"expression": "2+2"}), answer="never")
    fake.add_model("llama3:8b")
    done = client.chat.completions.create(model="llama3:8b", messages=MSG)
    assert "max_iterations" in (done.choices[0].message.content or "")
    assert done.choices[0].finish_reason == "stop"
    assert done.choices[0].message.tool_calls is None
    assert len(fake.chat_requests()) == 2


def test_a_repeated_identical_call_stops_the_loop(fake: FakeOllama,
                                                  client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("calc", {"expression": "1+1"})],
                                 finish="tool_calls"))  # the only reply: said again and again
    text, finish, calls, info = _stream(client)
    assert "repeated the same call to calc" in text
    assert (finish, calls) == ("stop", [])
    assert info["server_tool_iterations"] == 1


def test_tools_off_gets_no_server_tools(fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.add_model("mistral:7b")
    client.chat.completions.create(model="mistral:7b", messages=MSG)
    assert "tools" not in fake.chat_requests()[-1]


def test_keepalives_while_a_tool_runs(fake: FakeOllama, proxy_url: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_loop, "KEEPALIVE_EVERY", 0.1)
    _then(fake, "qwen3:8b", tool_call("slow", {}), answer="ok")
    body = httpx.post(proxy_url + "/v1/chat/completions", timeout=10, json={
        "model": "qwen3:8b", "messages": MSG, "stream": True}).text
    assert body.count(": keep-alive\n\n") >= 2
    assert body.rstrip().endswith("data: [DONE]")


def test_keepalives_reach_a_responses_stream_too(fake: FakeOllama, proxy_url: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The loop's keep-alive is an SSE comment, not a chunk: the Responses stream
    # writes it as one and goes on to the answer.
    monkeypatch.setattr(server_loop, "KEEPALIVE_EVERY", 0.1)
    _then(fake, "qwen3:8b", tool_call("slow", {}), answer="ok")
    body = httpx.post(proxy_url + "/v1/responses", timeout=10, json={
        "model": "qwen3:8b", "input": "help", "stream": True}).text
    assert body.count(": keep-alive\n\n") >= 2
    assert "event: response.completed" in body and "response.failed" not in body


def test_a_client_leaving_mid_loop_cancels_the_tool(fake: FakeOllama, proxy_url: str,
                                                    stock: tuple[Stock, str]) -> None:
    _then(fake, "qwen3:8b", tool_call("hang", {}), answer="never")
    with httpx.stream("POST", proxy_url + "/v1/chat/completions", timeout=10, json={
            "model": "qwen3:8b", "messages": MSG, "stream": True}) as reply:
        assert reply.status_code == 200
        time.sleep(0.5)  # the tool is running now
    assert stock[0].left.wait(5), "the running http tool was not cancelled"
    time.sleep(0.3)
    assert len(fake.chat_requests()) == 1  # the model was not asked again


@pytest.mark.parametrize("stream", [False, True])
def test_emulate_and_rename_apply_to_server_tools(fake: FakeOllama, client: openai.OpenAI,
                                                  stream: bool) -> None:
    text = get_format("hermes").render_calls([ParsedCall("calculate", {"expression": "3*3"})])
    fake.reply("gemma3:4b", Reply(content=[text[i:i + 7] for i in range(0, len(text), 7)]))
    fake.reply("gemma3:4b", Reply(content=["Nine."]))
    if stream:
        answer = _stream(client, "gemma3:4b")[0]
    else:
        answer = client.chat.completions.create(
            model="gemma3:4b", messages=MSG).choices[0].message.content
    assert answer == "Nine."
    first, second = fake.chat_requests()[-2:]
    assert "tools" not in first  # described in the prompt instead, under the upstream name
    assert "calculate" in orjson.dumps(first["messages"]).decode()
    assert "9" in orjson.dumps(second["messages"][-1]).decode()


def test_server_tools_hot_reload_and_metrics(fake: FakeOllama, client: openai.OpenAI,
                                             caps_path: Path, proxy_url: str) -> None:
    caps = orjson.loads(caps_path.read_bytes())
    caps["server_tools"]["greet"] = {"kind": "mock", "result": "hello"}
    caps["models"]["qwen3*"] = {"server_tools": ["greet"]}
    edit_and_wait(caps_path, orjson.dumps(caps).decode(), proxy_url)  # reloaded in background
    _then(fake, "qwen3:8b", tool_call("greet", {}), answer="Hi.")
    assert client.chat.completions.create(
        model="qwen3:8b", messages=MSG).choices[0].message.content == "Hi."
    assert [t["function"]["name"] for t in fake.chat_requests()[0]["tools"]] == ["greet"]
    scrape = httpx.get(proxy_url + "/metrics").text
    assert 'toolshim_server_tool_calls_total{outcome="ok",tool="greet"} 1.0' in scrape
    assert 'toolshim_server_tool_latency_seconds_count{tool="greet"} 1.0' in scrape

